#!/usr/bin/env bash
# Start the two container engines the docker backend's tests run against,
# each private to a test directory and off the host's network:
#   - a Docker Engine (dockerd, with its own containerd, data and exec roots,
#     no bridge, no iptables, no IP forwarding), user-namespace remapped
#   - Podman's API service (`podman system service`), runtime runc, its own
#     storage (--root/--runroot), so other users of podman are untouched
# and import into both the test image `cm-test:latest`, made from local files
# (busybox-static with its applets, and the host's python3 when it can be
# copied).  Prints, and writes to DIR/env, one line per engine:
#   DOCKER_SOCK=/path   PODMAN_SOCK=/path
# and, for an engine that could not start, DOCKER_SKIP=why / PODMAN_SKIP=why.
#
#   tests/engines/start.sh [DIR]   (default $CM_ENGINES_DIR or /tmp/cm-engines)
# Stop with tests/engines/stop.sh [DIR].  Needs root (both daemons run as
# root); `scripts/deps.sh --test` installs docker.io, podman, runc and
# busybox-static.
set -uo pipefail

dir="${1:-${CM_ENGINES_DIR:-/tmp/cm-engines}}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
env_file="$dir/env"
: >"$env_file"

say() { echo "$1" | tee -a "$env_file"; }

# The deadline of every wait below: a loaded machine is slow, never hung.
wait_for() { # what, seconds, command...
        local what="$1" secs="$2" i
        shift 2
        for ((i = 0; i < secs * 10; i++)); do
                "$@" >/dev/null 2>&1 && return 0
                sleep 0.1
        done
        echo "engines: $what did not come up within ${secs}s" >&2
        return 1
}

image_tar() {
        local tar="$dir/cm-test.tar"
        [[ -s "$tar" ]] && return 0
        "$here/image.sh" "$dir/rootfs" "$tar"
}

# A CA, a server certificate for 127.0.0.1 and a client certificate, for
# dockerd's TLS listener (DOCKER_HOST=tcp:// with DOCKER_TLS_VERIFY): the
# client's ca.pem, cert.pem, key.pem in DIR/docker/tls/client.
make_certs() { # dir
        local t="$1"
        [[ -s "$t/client/key.pem" ]] && return 0
        mkdir -p "$t/client" &&
        openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=cm-test-ca -keyout "$t/ca-key.pem" \
                -out "$t/ca.pem" 2>/dev/null &&
        openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$t/server-key.pem" -out "$t/server.csr" 2>/dev/null &&
        printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$t/server.ext" &&
        openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial -days 30 \
                -extfile "$t/server.ext" -out "$t/server-cert.pem" 2>/dev/null &&
        openssl req -newkey rsa:2048 -nodes -subj /CN=cm-test-client -keyout "$t/client/key.pem" -out "$t/client.csr" 2>/dev/null &&
        printf 'extendedKeyUsage=clientAuth\n' >"$t/client.ext" &&
        openssl x509 -req -in "$t/client.csr" -CA "$t/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial -days 30 \
                -extfile "$t/client.ext" -out "$t/client/cert.pem" 2>/dev/null &&
        cp "$t/ca.pem" "$t/client/ca.pem"
}

start_docker() {
        local d="$dir/docker" sock="$dir/docker/docker.sock" tls=() port
        if [[ $(id -u) -ne 0 ]]; then say "DOCKER_SKIP='dockerd needs root'"; return; fi
        if ! command -v dockerd >/dev/null; then say "DOCKER_SKIP='dockerd is not installed (apt-get install docker.io)'"; return; fi
        mkdir -p "$d"
        if ! curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then
                # No engine answers: what a killed run left (a half-made
                # id-mapped data root, which dockerd then refuses) goes.
                rm -rf "$sock" "$d/data" "$d/exec" "$d/tls.env"
                # dockerd's remapped root must walk down to its data root: a
                # test dir left 0700 (containers/storage makes its roots so,
                # and a stop that could not remove them keeps them) stops it
                # with "a subdirectory in your graphroot path restricts access"
                chmod o+x "$dir" "$d"
                if command -v openssl >/dev/null && make_certs "$d/tls" &&
                        port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"; then
                        tls=(--host "tcp://127.0.0.1:$port" --tlsverify --tlscacert "$d/tls/ca.pem"
                                --tlscert "$d/tls/server-cert.pem" --tlskey "$d/tls/server-key.pem")
                        printf 'DOCKER_TLS_HOST=tcp://127.0.0.1:%s\nDOCKER_TLS_CERTS=%s\n' "$port" "$d/tls/client" >"$d/tls.env"
                fi
                # Remapped user namespaces: root in a container is dockremap's
                # subordinate range on the host, the engine's equivalent of
                # the native runtime's user namespace.
                setsid dockerd --host "unix://$sock" "${tls[@]}" --data-root "$d/data" --exec-root "$d/exec" \
                        --pidfile "$d/pid" --bridge none --iptables=false --ip6tables=false \
                        --ip-forward=false --ip-masq=false --userns-remap=default \
                        --storage-driver vfs --log-level warn >"$d/log" 2>&1 </dev/null &
                if ! wait_for dockerd 60 curl -sf --unix-socket "$sock" http://d/_ping; then
                        say "DOCKER_SKIP='dockerd did not start: $(tail -n 3 "$d/log" | tr "'\n" '" ')'"
                        return
                fi
        fi
        if ! docker -H "unix://$sock" image inspect cm-test:latest >/dev/null 2>&1; then
                docker -H "unix://$sock" import "$dir/cm-test.tar" cm-test:latest >/dev/null ||
                        { say "DOCKER_SKIP='docker import of the test image failed'"; return; }
        fi
        say "DOCKER_SOCK=$sock"
        if [[ -s "$d/tls.env" ]]; then
                while read -r line; do say "$line"; done <"$d/tls.env"
        fi
}

podman_() { podman --root "$dir/podman/root" --runroot "$dir/podman/run" --runtime runc \
        --cgroup-manager cgroupfs --events-backend file "$@"; }

start_podman() {
        local d="$dir/podman" sock="$dir/podman/podman.sock"
        if [[ $(id -u) -ne 0 ]]; then say "PODMAN_SKIP='the podman service of the tests runs as root'"; return; fi
        if ! command -v podman >/dev/null; then say "PODMAN_SKIP='podman is not installed (apt-get install podman)'"; return; fi
        mkdir -p "$d"
        # Rootful Podman gives each container its own user namespace only with
        # --userns=auto (the docker backend asks for it), which takes ids from
        # the subordinate ranges of the user "containers".
        for f in /etc/subuid /etc/subgid; do
                grep -q '^containers:' "$f" 2>/dev/null || echo 'containers:1000000:4194304' >>"$f"
        done
        if ! curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then
                # No engine answers: what a killed run left (a half-made
                # id-mapped data root, which dockerd then refuses) goes.
                rm -rf "$sock" "$d/data" "$d/exec"
                # The test registry (tests/registry/start.sh) serves plain
                # HTTP on a loopback port: insecure for 127.0.0.1 (any port)
                # here, as dockerd takes 127.0.0.0/8, for this service only.
                printf 'unqualified-search-registries = ["docker.io"]\n[[registry]]\nlocation = "127.0.0.1"\ninsecure = true\n' >"$d/registries.conf"
                CONTAINERS_REGISTRIES_CONF="$d/registries.conf" \
                setsid podman --root "$d/root" --runroot "$d/run" --runtime runc --cgroup-manager cgroupfs \
                        --events-backend file system service --time=0 "unix://$sock" >"$d/log" 2>&1 </dev/null &
                echo $! >"$d/pid"
                if ! wait_for podman 60 curl -sf --unix-socket "$sock" http://d/_ping; then
                        say "PODMAN_SKIP='podman system service did not start: $(tail -n 3 "$d/log" | tr "'\n" '" ')'"
                        return
                fi
        fi
        if ! podman_ image exists cm-test:latest; then
                podman_ import -q "$dir/cm-test.tar" cm-test:latest >/dev/null ||
                        { say "PODMAN_SKIP='podman import of the test image failed'"; return; }
        fi
        say "PODMAN_SOCK=$sock"
}

if ! image_tar; then
        say "DOCKER_SKIP='no test image (busybox-static missing?)'"
        say "PODMAN_SKIP='no test image (busybox-static missing?)'"
        exit 0
fi
start_docker
start_podman
