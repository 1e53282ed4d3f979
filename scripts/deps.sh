#!/usr/bin/env bash
# Install the Debian packages container-mcp needs, only those missing.
#   scripts/deps.sh          what building and serving need
#   scripts/deps.sh --test   plus what every test needs
set -euo pipefail

build_pkgs=(build-essential meson ninja-build pkg-config
            libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libseccomp-dev libcap-dev
            libarchive-dev)
test_pkgs=(libcmocka-dev valgrind clang libclang-rt-14-dev nodejs npm python3 curl procps
           iproute2 util-linux slirp4netns passt qemu-system-x86 busybox-static libcap2-bin
           docker.io podman runc file
           docker-registry skopeo apache2-utils openssl zstd python3-jwt python3-cryptography)

pkgs=("${build_pkgs[@]}")
[[ "${1:-}" == "--test" ]] && pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come from elsewhere than Debian's package (e.g. a newer Node.js).
if [[ " ${missing[*]} " == *" npm "* ]] && command -v npm >/dev/null; then
        missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]}"
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
echo "container-mcp: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
