#!/bin/bash
# Inside the test VM (tests/vm/cgroup2.sh boots it): pid 1, on an overlay of
# the host's root.  Sets up a pure cgroup v2 hierarchy as systemd would,
# then runs the native runtime's tests four ways: as root, as root without
# warm sandboxes, as nobody (--unprivileged, no cgroup of its own: rlimits),
# and as nobody inside a delegated cgroup (systemd's Delegate=yes), plus
# checks that the server reports v2 and that nothing leaked.  Each test's
# output and exit code go to the results share; the host counts them.
#
#   guest.sh               the whole run (pid 1 only)
#   guest.sh check NAME    one of the checks below, as a test of its own
set -uo pipefail # no -e: a failing test must not end pid 1

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LC_ALL=C.UTF-8
cg=/sys/fs/cgroup
results=/mnt/results

arg() { sed -n "s/.*$1=\\([^ ]*\\).*/\\1/p" /proc/cmdline; }
build=$(arg cmbuild)
bin=$build/container-mcp

# ---- checks (each run as a test: exit 0 passes) -------------------------

# A cgroup nobody owns, as systemd's Delegate=yes leaves it.
delegate() { # path
        mkdir "$1" && chown 65534:65534 "$1" "$1/cgroup.procs" "$1/cgroup.subtree_control" "$1/cgroup.threads"
}

# A user's tree as systemd makes it: <name> delegated to nobody (like
# user@.service) with the controllers on for its children; in it the scope
# a server runs in, delegated too, and another unit's, empty.
user_tree() { # name
        local c
        delegate "$cg/$1" || return 1
        for c in cpu memory pids io; do
                echo "+$c" >"$cg/$1/cgroup.subtree_control" || return 1
        done
        delegate "$cg/$1/app.scope" && delegate "$cg/$1/other.scope"
}

# Run a command as a member of a cgroup: sh -c "$join" sh DIR COMMAND...
# shellcheck disable=SC2016 # expanded by that sh
join='echo $$ >"$1/cgroup.procs" && shift && exec "$@"'

expect() { # what, json, fixed strings...
        local what=$1 json=$2
        shift 2
        for s in "$@"; do
                if ! grep -qF -- "$s" <<<"$json"; then
                        echo "$json"
                        echo "FAIL: $what: no '$s' in the output above"
                        return 1
                fi
        done
        echo "ok: $what says: $*"
}

check_status_root() {
        local out
        out=$("$bin" status) || return 1
        expect "container-mcp status (root)" "$out" '"cgroup": "v2"' "\"cgroup_detail\": \"v2 under $cg/container-mcp/"
}

check_system_status_mcp() {
        local out
        out=$(printf '%s\n' \
                '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"vm","version":"1"}}}' \
                '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
                '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"system_status","arguments":{}}}' |
                "$bin" serve | grep '"id":2') || return 1
        expect "system_status over MCP stdio (root)" "$out" '"isError":false' '"cgroup":"v2"' '"limits":"cgroup v2'
}

check_status_delegated() {
        local out state
        state=$(mktemp -d) && chown 65534:65534 "$state" && user_tree status-delegated || return 1
        out=$(sh -c "$join" sh "$cg/status-delegated/app.scope" \
                setpriv --reuid=65534 --regid=65534 --clear-groups \
                env HOME=/nonexistent CONTAINER_MCP_STATE_DIR="$state" "$bin" status) || return 1
        expect "container-mcp status (nobody, delegated cgroup)" "$out" '"cgroup": "v2"' '"rootless": true' \
                "\"cgroup_detail\": \"v2 under $cg/status-delegated/app.scope/container-mcp/"
}

# No cgroup that holds a process or that a container left, no process but
# ours.  (Files in /proc and cgroupfs say size 0: read them to see.)
check_no_leaks() {
        local bad=0 d pid ppid
        while read -r d; do
                if [[ -n $(cat "$d/cgroup.procs") ]]; then
                        echo "LEAK: processes in ${d#"$cg"}: $(tr '\n' ' ' <"$d/cgroup.procs")"
                        bad=1
                fi
        done < <(find "$cg" -mindepth 1 -type d)
        # .../container-mcp/<tag>/<anything>: a container's (or a server's)
        while read -r d; do
                # when it was made: the test whose "ended" time follows it made it
                echo "LEAK: cgroup ${d#"$cg"} (made $(stat -c %y "$d" | cut -c12-26))"
                bad=1
        done < <(find "$cg" -path '*/container-mcp/*/*' -type d)
        for d in /proc/[0-9]*; do
                pid=${d#/proc/}
                # kernel threads have no command line
                [[ -n $(tr -d '\0' 2>/dev/null <"$d/cmdline") ]] || continue
                ppid=$(awk '/^PPid:/ { print $2 }' "$d/status" 2>/dev/null)
                # pid 1, this check, its timeout, its commands, pid 1's tee
                [[ $pid == 1 || $pid == "$$" || $pid == "$PPID" || $ppid == "$$" ]] && continue
                [[ $ppid == 1 && $(cat "$d/comm" 2>/dev/null) == tee ]] && continue
                echo "LEAK: process $pid: $(tr '\0' ' ' 2>/dev/null <"$d/cmdline")"
                bad=1
        done
        [[ $bad == 0 ]] && echo "ok: no cgroup, container or process left"
        return "$bad"
}

if [[ ${1:-} == check ]]; then
        "check_${2//-/_}"
        exit
fi

# ---- pid 1 --------------------------------------------------------------

halt() {
        sync
        exec /bin/busybox poweroff -f
}

# What the run needs from the host's /tmp (a CI checkout, say), bound back
# over the guest's own.
keep_host_tmp() { # path...
        local p
        for p in "$@"; do
                [[ $p == /tmp/* ]] || continue
                mkdir -p "$p" && mount --bind "/run/host-tmp/${p#/tmp/}" "$p" || return 1
        done
}

setup() {
        local c
        mount -t tmpfs -o mode=0755 run /run || return 1
        # modules the kernel asks for (ext4, tun...) from the unpacked
        # package; /lib/modules of the host is for another kernel
        mkdir -p /lib/modules &&
                ln -s "$(arg cmmodules)" "/lib/modules/$(uname -r)" &&
                ln -s /bin/busybox /run/modprobe &&
                echo /run/modprobe >/proc/sys/kernel/modprobe || return 1
        # /tmp (the tests' state dirs) on a disk: block I/O is counted
        mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 /dev/vda &&
                mkdir /run/host-tmp && mount --bind /tmp /run/host-tmp &&
                mount /dev/vda /tmp && chmod 1777 /tmp &&
                keep_host_tmp "$(dirname "$0")" "$build" "$(arg cmmodules)" &&
                mkdir -p /dev/pts /dev/shm /var/lib/container-mcp "$results" &&
                mount -t devpts -o gid=5,mode=0620,ptmxmode=0666 devpts /dev/pts &&
                ln -sf /proc/self/fd /dev/fd &&
                mount -t tmpfs -o mode=1777 shm /dev/shm &&
                mount -t tmpfs -o mode=0700 state /var/lib/container-mcp &&
                mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results "$results" || return 1
        # systemd's mount options, and the controllers it enables
        mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 "$cg" || return 1
        for c in cpu memory pids io; do
                echo "+$c" >"$cg/cgroup.subtree_control" || return 1
        done
}

run() { # name, command...
        local name=$1 t0 rc
        shift
        echo "=== $name: $*"
        t0=$(date +%s%N)
        timeout -k 5 "$(arg cmtimeout)" "$@" </dev/null 2>&1 | tee "$results/$name.log"
        rc=${PIPESTATUS[0]}
        echo "$rc" >"$results/$name.rc"
        echo "=== $name: exit $rc, $((($(date +%s%N) - t0) / 1000000)) ms (ended $(date +%T.%N))"
}

# Each test binary as nobody in a delegated cgroup of its own: detect_v2's
# rootless path (the server moves itself to cm-supervisor).  Afterwards no
# container's cgroup may be left, and the user's other cgroups, one beside
# ours in the delegated cgroup and another unit's beside that, must be
# untouched: a server reaps only its own tree.
run_delegated() { # name, binary
        local name=$1 d=$cg/$1/app.scope bad
        if ! user_tree "$name" || ! delegate "$d/bystander"; then
                echo 1 >"$results/$name.rc"
                return
        fi
        run "$name" sh -c "$join" sh "$d" "$2" --unprivileged
        bad=$(find "$cg/$name" -path '*/container-mcp/*/*' -type d)
        [[ -d $d/bystander ]] || bad+=" $d/bystander (removed)"
        [[ -d $cg/$name/other.scope ]] || bad+=" $cg/$name/other.scope (removed)"
        if [[ -n $bad ]]; then
                echo "FAIL: $name left or removed cgroups: $bad" | tee -a "$results/$name.log"
                [[ $(cat "$results/$name.rc") != 0 ]] || echo 1 >"$results/$name.rc"
        fi
        find "$cg/$name" -depth -type d -exec rmdir {} + 2>/dev/null
}

main() {
        local names=() tests t
        IFS=, read -r -a tests <<<"$(arg cmtests)"
        for t in "${tests[@]}"; do
                names+=("$t" "$t-cold" "$t-unprivileged" "$t-delegated")
        done
        names=(status-root system-status-mcp status-delegated "${names[@]}" no-leaks)
        printf '%s\n' "${names[@]}" >"$results/plan"

        echo "=== kernel $(uname -r), cgroup2 controllers: $(cat "$cg/cgroup.subtree_control")"
        run status-root bash "$0" check status-root
        run system-status-mcp bash "$0" check system-status-mcp
        run status-delegated bash "$0" check status-delegated
        for t in "${tests[@]}"; do
                run "$t" "$build/tests/native/test_native_$t"
                run "$t-cold" env CONTAINER_MCP_NATIVE_WARM=0 "$build/tests/native/test_native_$t"
                run "$t-unprivileged" "$build/tests/native/test_native_$t" --unprivileged
                run_delegated "$t-delegated" "$build/tests/native/test_native_$t"
        done
        run no-leaks bash "$0" check no-leaks
}

if ! setup; then
        echo "VM-SETUP-FAILED"
        halt
fi
main
echo "=== VM-DONE"
halt
