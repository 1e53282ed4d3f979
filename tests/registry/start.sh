#!/usr/bin/env bash
# Start the test registries on free loopback ports, filled with images made
# from this machine's own files (no network):
#   tests/registry/start.sh DIR      (stop with tests/registry/stop.sh DIR)
#
#   anon   anonymous                                  REGISTRY=127.0.0.1:PORT
#   basic  htpasswd basic auth                        REGISTRY_BASIC=127.0.0.1:PORT
#   token  token auth, with a token server of ours    REGISTRY_TOKEN=127.0.0.1:PORT
#   tls    TLS from a CA of ours, client certificates REGISTRY_TLS=127.0.0.1:PORT
#          required (REGISTRY_TLS_DIR: certs/ is its certs.d entry)
#   tlsopen  the same certificate, no client ones   REGISTRY_TLS_OPEN=127.0.0.1:PORT
# (REGISTRY_USER / REGISTRY_PASSWORD for both), or REGISTRY_SKIP=why when
# this machine cannot run them.  Everything lives under DIR: each registry's
# storage, configs, logs, pids, and the built images (rebuilt only when their
# inputs change).  A second start while they run reuses them.
#
# anon holds busybox (gzip, OCI; also as library/busybox, for a Hub mirror), busybox:v2s2 (Docker schema 2), zstd,
# python (host python3 + its libraries + stdlib), multi (linux/amd64 and
# linux/arm64) and config (Env, WorkingDir, User, Entrypoint, Cmd,
# ExposedPorts); basic, token, tls and tlsopen hold busybox.
set -euo pipefail

DIR=${1:?usage: tests/registry/start.sh DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3 # Debian's, with python3-jwt (not a pyenv shim's)
USER_NAME=cmtest
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

skip() {
        echo "REGISTRY_SKIP=$*" >"$DIR/env"
        echo "tests/registry: not started: $*" >&2
        exit 0
}

# Poll `url` until it answers HTTP at all (200 or 401), for at most $2 s.
wait_http() {
        local url=$1 deadline=$((SECONDS + $2)) code
        while ((SECONDS < deadline)); do
                code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" || true)
                [[ $code == 200 || $code == 401 ]] && return 0
                sleep 0.1
        done
        return 1
}

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Already running: reuse.
if [[ -f $DIR/env ]] && grep -q '^REGISTRY_TLS_OPEN=' "$DIR/env" && alive "$DIR/anon/pid" && alive "$DIR/basic/pid" &&
        alive "$DIR/token/pid" && alive "$DIR/token/server.pid" && alive "$DIR/tls/pid" && alive "$DIR/tlsopen/pid"; then
        reg=$(sed -n 's/^REGISTRY=//p' "$DIR/env")
        if wait_http "http://$reg/v2/" 5; then
                echo "tests/registry: already running ($DIR/env)" >&2
                exit 0
        fi
fi
"$HERE/stop.sh" "$DIR" >/dev/null 2>&1 || true
rm -f "$DIR/env"

for tool in docker-registry skopeo htpasswd openssl zstd curl busybox; do
        command -v "$tool" >/dev/null || skip "$tool is missing: run scripts/deps.sh --test (docker-registry skopeo apache2-utils openssl zstd curl busybox-static)"
done
if ! /bin/busybox --list >/dev/null 2>&1; then skip "/bin/busybox (busybox-static) is missing"; fi
"$PY" -c 'import jwt, cryptography' 2>/dev/null || skip "python3-jwt is missing: run scripts/deps.sh --test"

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The images, rebuilt when the script, busybox or python change.
stamp=$(cat "$HERE/mkimages.py" /bin/busybox "$(readlink -f /usr/bin/python3)" | sha256sum | cut -c1-16)
if [[ ! -f $DIR/images/stamp || $(cat "$DIR/images/stamp") != "$stamp" ]]; then
        rm -rf "$DIR/images"
        "$PY" "$HERE/mkimages.py" "$DIR/images.tmp"
        mv "$DIR/images.tmp" "$DIR/images"
        echo "$stamp" >"$DIR/images/stamp"
fi

# Credentials, made once per DIR.
if [[ ! -f $DIR/password ]]; then
        (umask 077 && openssl rand -hex 12 >"$DIR/password")
fi
PASSWORD=$(cat "$DIR/password")

config() { # name port [auth yaml]
        local name=$1 port=$2
        mkdir -p "$DIR/$name/storage"
        cat >"$DIR/$name/config.yml" <<YAML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/$name/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  secret: $(openssl rand -hex 16)
$3
YAML
}

launch() { # name
        setsid docker-registry serve "$DIR/$1/config.yml" >"$DIR/$1/log" 2>&1 </dev/null &
        echo $! >"$DIR/$1/pid"
}

# (a) anonymous
ANON=$(free_port)
config anon "$ANON" ""
launch anon

# (b) htpasswd basic auth (the registry wants bcrypt)
BASIC=$(free_port)
htpasswd -Bbn "$USER_NAME" "$PASSWORD" >"$DIR/htpasswd"
config basic "$BASIC" "auth:
  htpasswd:
    realm: cm-test
    path: $DIR/htpasswd"
launch basic

# (c) token auth: our own key and certificate, our token server
mkdir -p "$DIR/token"
if [[ ! -f $DIR/token/cert.pem ]]; then
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=cm-test-token \
                -keyout "$DIR/token/key.pem" -out "$DIR/token/cert.pem" 2>/dev/null
fi
rm -f "$DIR/token/port"
setsid "$PY" "$HERE/token_server.py" "$DIR/token/port" "$DIR/token/key.pem" "$DIR/token/cert.pem" cm-test-issuer \
        cm-test-registry "$USER_NAME" "$PASSWORD" >"$DIR/token/server.log" 2>&1 </dev/null &
echo $! >"$DIR/token/server.pid"
deadline=$((SECONDS + 30))
while [[ ! -s $DIR/token/port ]] && ((SECONDS < deadline)); do
        alive "$DIR/token/server.pid" || skip "the token server died: $(tail -3 "$DIR/token/server.log")"
        sleep 0.1
done
[[ -s $DIR/token/port ]] || skip "the token server did not start within 30 s"
TPORT=$(cat "$DIR/token/port")
TOKEN=$(free_port)
config token "$TOKEN" "auth:
  token:
    realm: http://127.0.0.1:$TPORT/token
    service: cm-test-registry
    issuer: cm-test-issuer
    rootcertbundle: $DIR/token/cert.pem"
launch token

# (d) TLS with our own CA, asking every client for a certificate of that CA
# (mutual TLS).  certs/ is a certs.d entry as Docker and Podman keep one
# (ca.crt, client.cert, client.key); other-ca.crt is a CA that signed nothing.
T=$DIR/tls
if [[ ! -f $T/certs/client.key ]]; then
        rm -rf "$T" && mkdir -p "$T/certs"
        ca() { openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$1" -keyout "$2.key" -out "$2.crt" 2>/dev/null; }
        signed() { # name subject extfile-line
                openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$T/$1.key" -out "$T/$1.csr" 2>/dev/null
                printf '%s\n' "$3" >"$T/$1.ext"
                openssl x509 -req -in "$T/$1.csr" -CA "$T/ca.crt" -CAkey "$T/ca.key" -CAcreateserial -days 3650 \
                        -extfile "$T/$1.ext" -out "$T/$1.crt" 2>/dev/null
        }
        ca cm-test-ca "$T/ca"
        ca cm-test-other-ca "$T/other-ca"
        signed server 127.0.0.1 "subjectAltName=IP:127.0.0.1"
        signed client cm-test-client "extendedKeyUsage=clientAuth"
        cp "$T/ca.crt" "$T/certs/ca.crt"
        cp "$T/client.crt" "$T/certs/client.cert"
        (umask 077 && cp "$T/client.key" "$T/certs/client.key")
fi
TLS=$(free_port)
config tls "$TLS" "  tls:
    certificate: $T/server.crt
    key: $T/server.key
    clientcas:
      - $T/ca.crt"
launch tls
TLSOPEN=$(free_port)
config tlsopen "$TLSOPEN" "  tls:
    certificate: $T/server.crt
    key: $T/server.key"
launch tlsopen
deadline=$((SECONDS + 60))
until curl -s -o /dev/null -m 2 --cacert "$T/ca.crt" --cert "$T/certs/client.cert" --key "$T/certs/client.key" \
        "https://127.0.0.1:$TLS/v2/"; do
        ((SECONDS < deadline)) || skip "the tls registry did not answer within 60 s: $(tail -3 "$DIR/tls/log")"
        sleep 0.1
done

deadline=$((SECONDS + 60))
until curl -s -o /dev/null -m 2 --cacert "$T/ca.crt" "https://127.0.0.1:$TLSOPEN/v2/"; do
        ((SECONDS < deadline)) || skip "the tlsopen registry did not answer within 60 s: $(tail -3 "$DIR/tlsopen/log")"
        sleep 0.1
done

for r in anon:$ANON basic:$BASIC token:$TOKEN; do
        wait_http "http://127.0.0.1:${r#*:}/v2/" 60 ||
                skip "the ${r%%:*} registry did not answer within 60 s: $(tail -3 "$DIR/${r%%:*}/log")"
done

push() { # args to skopeo copy
        skopeo copy -q --dest-tls-verify=false "$@" >>"$DIR/push.log" 2>&1 ||
                skip "skopeo copy $* failed: $(tail -3 "$DIR/push.log")"
}
I=$DIR/images
push "oci:$I/busybox:latest" "docker://127.0.0.1:$ANON/busybox:latest"
push "oci:$I/busybox:latest" "docker://127.0.0.1:$ANON/library/busybox:latest" # as a Docker Hub mirror has it
push --format v2s2 "oci:$I/busybox:latest" "docker://127.0.0.1:$ANON/busybox:v2s2"
push "oci:$I/zstd:latest" "docker://127.0.0.1:$ANON/zstd:latest"
push "oci:$I/python:latest" "docker://127.0.0.1:$ANON/python:latest"
push --all "oci:$I/multi:latest" "docker://127.0.0.1:$ANON/multi:latest"
push "oci:$I/config:latest" "docker://127.0.0.1:$ANON/config:latest"
push --dest-creds "$USER_NAME:$PASSWORD" "oci:$I/busybox:latest" "docker://127.0.0.1:$BASIC/busybox:latest"
push --dest-creds "$USER_NAME:$PASSWORD" "oci:$I/busybox:latest" "docker://127.0.0.1:$TOKEN/busybox:latest"
skopeo copy -q --dest-cert-dir "$T/certs" "oci:$I/busybox:latest" "docker://127.0.0.1:$TLS/busybox:latest" \
        >>"$DIR/push.log" 2>&1 || skip "skopeo copy to the tls registry failed: $(tail -3 "$DIR/push.log")"
skopeo copy -q --dest-cert-dir "$T/certs" "oci:$I/busybox:latest" "docker://127.0.0.1:$TLSOPEN/busybox:latest" \
        >>"$DIR/push.log" 2>&1 || skip "skopeo copy to the tlsopen registry failed: $(tail -3 "$DIR/push.log")"

cat >"$DIR/env.tmp" <<ENV
REGISTRY=127.0.0.1:$ANON
REGISTRY_BASIC=127.0.0.1:$BASIC
REGISTRY_TOKEN=127.0.0.1:$TOKEN
REGISTRY_TLS=127.0.0.1:$TLS
REGISTRY_TLS_DIR=$T
REGISTRY_TLS_OPEN=127.0.0.1:$TLSOPEN
REGISTRY_USER=$USER_NAME
REGISTRY_PASSWORD=$PASSWORD
ENV
mv "$DIR/env.tmp" "$DIR/env"
echo "tests/registry: running ($DIR/env)" >&2
