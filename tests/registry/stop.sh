#!/usr/bin/env bash
# Stop what tests/registry/start.sh DIR started (its pids only); the storage
# and the built images stay for a fast next start.
set -uo pipefail
DIR=${1:?usage: tests/registry/stop.sh DIR}
[[ -d $DIR ]] || exit 0
pids=()
for f in "$DIR"/anon/pid "$DIR"/basic/pid "$DIR"/token/pid "$DIR"/token/server.pid "$DIR"/tls/pid "$DIR"/tlsopen/pid; do
        [[ -f $f ]] || continue
        pid=$(cat "$f")
        # only a process that is still the one we started
        if kill -0 "$pid" 2>/dev/null && grep -qE 'docker-registry|token_server' "/proc/$pid/cmdline" 2>/dev/null; then
                kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
        fi
        rm -f "$f"
done
deadline=$((SECONDS + 10))
for pid in "${pids[@]}"; do
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
done
rm -f "$DIR/env"
exit 0
