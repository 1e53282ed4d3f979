#!/usr/bin/env bash
# setup-peers.sh: install the peers that bench/native measures container-mcp
# against (podman with runc, bubblewrap) and busybox-static, from which
# bench/native builds its local test image.  Debian packages only; nothing
# else is downloaded.  Safe to run again: it installs what is missing and
# writes /etc/containers/containers.conf only when that file does not exist.
#
# Why the config: on a host with hybrid cgroups crun (podman's default
# runtime on Debian 12) fails to start containers, so podman is told to use
# runc; and podman's default ulimits ask for more open files and processes
# than the low hard limits of a VM like this one allow, which fails every
# `podman run` with "setrlimit: operation not permitted".
set -euo pipefail

CONF=/etc/containers/containers.conf
PKGS=(podman runc bubblewrap busybox-static)

SUDO=
if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { echo "setup-peers: not root and no sudo" >&2; exit 1; }
        SUDO=sudo
fi

missing=()
for p in "${PKGS[@]}"; do
        dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
        echo "== apt-get install ${missing[*]}"
        $SUDO apt-get update -q
        # --no-install-recommends: podman recommends crun, which we do not use.
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
        echo "== installed already: ${PKGS[*]}"
fi

if [ -e "$CONF" ]; then
        echo "== $CONF exists, left as it is; bench/native needs in it:"
        grep -nE '^[[:space:]]*(runtime|default_ulimits)[[:space:]]*=' "$CONF" || echo "   (neither runtime nor default_ulimits is set)"
else
        echo "== writing $CONF (runtime runc, default ulimits within the host's hard limits)"
        $SUDO mkdir -p "$(dirname "$CONF")"
        $SUDO tee "$CONF" >/dev/null <<'EOF'
# Written by container-mcp's bench/setup-peers.sh.
[containers]
# podman's defaults ask for more than this host's hard limits allow.
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
# crun fails on this host's hybrid cgroup hierarchy; runc works.
runtime = "runc"
EOF
fi

echo "== versions"
podman --version
runc --version | sed -n 1p
bwrap --version
/bin/busybox 2>&1 | sed -n 1p
