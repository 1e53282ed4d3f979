#!/usr/bin/env bash
# Stop what tests/engines/start.sh started in DIR, by the pids it recorded,
# and remove DIR.
#   tests/engines/stop.sh [DIR]   (default $CM_ENGINES_DIR or /tmp/cm-engines)
set -uo pipefail
dir="${1:-${CM_ENGINES_DIR:-/tmp/cm-engines}}"
[[ -d "$dir" ]] || exit 0

stop_pid() { # pidfile
        local pid i
        pid="$(cat "$1" 2>/dev/null)" || return 0
        [[ "$pid" =~ ^[0-9]+$ ]] || return 0
        kill -TERM "$pid" 2>/dev/null || return 0
        for ((i = 0; i < 300; i++)); do
                kill -0 "$pid" 2>/dev/null || return 0
                sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null
}

# Containers first, so neither engine leaves a runc process behind.
for s in "$dir/docker/docker.sock" "$dir/podman/podman.sock"; do
        [[ -S "$s" ]] || continue
        for id in $(curl -sf --unix-socket "$s" 'http://d/containers/json?all=1' | grep -o '"Id":"[0-9a-f]*"' | cut -d'"' -f4); do
                curl -sf --unix-socket "$s" -X DELETE "http://d/containers/$id?force=1" >/dev/null
        done
done
stop_pid "$dir/docker/pid"
stop_pid "$dir/podman/pid"
# Storage drivers may leave mounts under the test directory.
grep -o " $dir/[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
rm -rf "$dir"
