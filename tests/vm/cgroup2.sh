#!/usr/bin/env bash
# The native runtime's tests on a pure cgroup v2 hierarchy, in a qemu VM with
# Debian's own kernel: for hosts whose cgroups are v1 or hybrid, where the v2
# code of src/backend/native/cgroup.c never runs.
#
#   tests/vm/cgroup2.sh     build/ must be built (ninja -C build)
#
# The kernel package is downloaded (never installed) into the cache.  The VM
# sees the host's / read-only over 9p under a tmpfs overlay, has a sparse
# scratch disk as /tmp, and writes its results to a second 9p share.  Ends with
# "# pass N", "# fail N", "# skipped N", counting each cmocka case (their TAP
# lines, tests/tap.h) and each skip with its reason ("ok - name # SKIP why");
# exits 0 when nothing failed.  It skips (exit 77) only when this machine
# truly cannot run the VM: no qemu, or the kernel package cannot be
# downloaded with apt-get.  Anything else missing (busybox, a test binary
# not built, the initramfs) is a failure.
#
# Environment:
#   CM_VM_BUILD    the build dir (default: build/ of this checkout)
#   CM_VM_CACHE    where the kernel is kept (default: $CM_VM_BUILD/vm-cache)
#   CM_VM_TESTS    native tests to run (default: run limits lifecycle restart contain records image_copy guards)
#   CM_VM_TIMEOUT  seconds for the whole VM (default 900); each test gets 180
#   CM_VM_VERBOSE  1: the kernel's messages on the console too
#   CM_VM_ACCEL    qemu's accelerator (default tcg; kvm where it works)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(realpath -m "${CM_VM_BUILD:-$repo/build}")
cache=$(realpath -m "${CM_VM_CACHE:-$build/vm-cache}")
read -r -a tests <<<"${CM_VM_TESTS:-run limits lifecycle restart contain records image_copy guards}"
vm_timeout=${CM_VM_TIMEOUT:-900}

skip() {
        echo "SKIP: $*"
        echo "ok - the cgroup v2 VM # SKIP $*"
        printf '# pass 0\n# fail 0\n# skipped 1\n'
        exit 77
}

fail() {
        echo "FAIL: $*"
        echo "not ok - the cgroup v2 VM: $*"
        printf '# pass 0\n# fail 1\n# skipped 0\n'
        exit 1
}

# The image package that linux-image-amd64 depends on, e.g.
# linux-image-6.1.0-57-amd64.
kernel_package() {
        apt-cache depends linux-image-amd64 2>/dev/null |
                awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}

# Download and unpack the kernel package once; print the unpacked dir.
fetch_kernel() {
        local pkg dir
        pkg=$(kernel_package)
        if [[ -z $pkg ]]; then
                apt-get update -qq >&2 || true
                pkg=$(kernel_package)
        fi
        if [[ -z $pkg ]]; then # offline: any kernel unpacked before
                dir=$(find "$cache" -mindepth 2 -maxdepth 2 -name .complete -printf '%h\n' 2>/dev/null | sort | tail -1)
                [[ -n $dir ]] && { echo "$dir"; return; }
                return 2
        fi
        dir=$cache/$pkg
        [[ -f $dir/.complete ]] && { echo "$dir"; return; }
        # an older kernel's 400 MB are of no more use
        rm -rf "${cache:?}"/linux-image-*
        mkdir -p "$cache"
        if ! (cd "$cache" && apt-get download "$pkg") >&2; then
                apt-get update -qq >&2 || true
                (cd "$cache" && apt-get download "$pkg") >&2 || return 2
        fi
        dpkg-deb -x "$cache"/"$pkg"_*.deb "$dir" || return 1
        rm -f "$cache"/"$pkg"_*.deb
        # modules.dep is made by the package's postinst, which never ran
        /bin/busybox depmod -b "$dir" "${pkg#linux-image-}" || return 1
        touch "$dir/.complete"
        echo "$dir"
}

# The initramfs: busybox, tests/vm/init, and the modules for the host's root
# (virtio, 9p, overlay) and the scratch disk, with all they depend on: the
# guest has no udev to load them.
make_initramfs() { # kernel dir, version, output
        local kdir=$1 kver=$2 out=$3 root m
        local moddir=$kdir/lib/modules/$kver
        root=$(mktemp -d "$work/initramfs.XXXXXX")
        mkdir -p "$root/bin" "$root/modules" "$root/proc" "$root/sys" "$root/dev"
        cp /bin/busybox "$root/bin/busybox"
        cp "$here/init" "$root/init"
        chmod 0755 "$root/init"
        for m in virtio_pci virtio_blk 9pnet_virtio 9p overlay; do
                awk -v m="$m" '{ k = $1; sub(":$", "", k); n = k; sub(".*/", "", n); sub("[.]ko.*", "", n) }
                        n == m { for (i = 1; i <= NF; i++) { f = $i; sub(":$", "", f); print f } }' \
                        "$moddir/modules.dep"
        done | sort -u | while read -r m; do
                cp "$moddir/$m" "$root/modules/"
        done
        [[ -n $(ls "$root/modules") ]] || return 1
        (cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null) >"$out"
}

run_vm() { # kernel dir, version, initramfs
        local kdir=$1 kver=$2 initrd=$3 loglevel=1
        [[ ${CM_VM_VERBOSE:-} == 1 ]] && loglevel=7
        # no NIC: the default one wants a ROM we need not install.
        # --foreground: a ^C reaches qemu.  The console's CRs and the
        # firmware's terminal escapes would only clutter the log.
        timeout --foreground -k 10 "$vm_timeout" qemu-system-x86_64 \
                -accel "${CM_VM_ACCEL:-tcg}" -cpu max -smp 2 -m 2048 \
                -nographic -no-reboot -nic none \
                -kernel "$kdir/boot/vmlinuz-$kver" -initrd "$initrd" \
                -append "console=ttyS0 panic=-1 loglevel=$loglevel cmrepo=$repo cmbuild=$build \
cmmodules=$kdir/lib/modules/$kver cmtests=$(IFS=,; echo "${tests[*]}") cmtimeout=180" \
                -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
                -virtfs "local,path=$work/results,mount_tag=results,security_model=none" \
                -drive "file=$work/scratch.img,format=raw,if=virtio,cache=unsafe" \
                </dev/null 2>&1 | sed -u -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g; s/\r$//; s/\r/\n/g'
}

# One line per cmocka case (from the TAP lines in each test's log) or per
# check script of the plan the guest wrote, then the totals.
summary() {
        local pass=0 fail=0 skipped=0 name rc log r n why bad
        if [[ ! -f $work/results/plan ]]; then
                echo "not ok - the VM did not start its tests (see its console above)"
                printf '# pass 0\n# fail 1\n# skipped 0\n'
                return 1
        fi
        while read -r name; do
                rc=$(cat "$work/results/$name.rc" 2>/dev/null || echo none)
                log=$work/results/$name.log
                bad=0
                while IFS=$'\t' read -r r n why; do
                        case $r in
                        P) pass=$((pass + 1)); echo "ok - $name / $n" ;;
                        S) skipped=$((skipped + 1)); echo "ok - $name${n:+ / $n} # SKIP $why" ;;
                        F) fail=$((fail + 1)) bad=1; echo "not ok - $name / $n" ;;
                        esac
                done < <(tap_cases "$log")
                case $rc in
                0) grep -qE '^(not )?ok |^1\.\.0' "$log" 2>/dev/null || { pass=$((pass + 1)); echo "ok - $name"; } ;;
                77) skipped=$((skipped + 1))
                        echo "ok - $name # SKIP $(sed -n 's/^SKIP: //p' "$log" | tail -1)" ;;
                none) fail=$((fail + 1)); echo "not ok - $name: did not finish" ;;
                *) [[ $bad == 1 ]] || { fail=$((fail + 1)); echo "not ok - $name: exit $rc"; } ;;
                esac
        done <"$work/results/plan"
        printf '# pass %d\n# fail %d\n# skipped %d\n' "$pass" "$fail" "$skipped"
        [[ $fail -eq 0 ]]
}

# A test log's TAP lines as "P|F|S<TAB>case<TAB>why"; a whole-program skip
# ("1..0 # SKIP why") as an S with no case.
tap_cases() {
        sed -nE -e 's/^ok [0-9]+ - ([^#]*[^# ]) *# SKIP *(.*)$/S\t\1\t\2/p; t' \
                -e 's/^ok [0-9]+ - (.*)$/P\t\1\t/p; t' \
                -e 's/^not ok [0-9]+ - (.*)$/F\t\1\t/p; t' \
                -e 's/^1\.\.0 *# SKIP *(.*)$/S\t\t\1/p' "$1" 2>/dev/null
}

main() {
        local kdir kver t0 start
        start=$(date +%s)
        # The only reasons to skip: no qemu, no way to get Debian's kernel.
        command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
        { command -v apt-get && command -v dpkg-deb; } >/dev/null || skip "not Debian: no apt-get/dpkg-deb for the kernel"
        [[ -x /bin/busybox ]] || fail "/bin/busybox missing (apt-get install busybox-static)"
        [[ $(ldd /bin/busybox 2>&1) == *"not a dynamic"* ]] || fail "/bin/busybox is not static (apt-get install busybox-static)"
        for t in "${tests[@]}"; do
                [[ -x $build/tests/native/test_native_$t ]] || fail "$build/tests/native/test_native_$t not built (ninja -C build)"
        done
        [[ -x $build/container-mcp ]] || fail "$build/container-mcp not built (ninja -C build)"
        if [[ "$repo$build$cache" == *[[:space:]]* ]]; then # they go on the kernel command line
                fail "paths with spaces are not supported: $repo, $build, $cache"
        fi

        t0=$(date +%s)
        kdir=$(fetch_kernel) || case $? in
                2) skip "cannot download linux-image-amd64's kernel package with apt-get download" ;;
                *) fail "cannot unpack the kernel package into $cache (dpkg-deb -x, busybox depmod)" ;;
                esac
        kver=$(basename "$kdir")
        kver=${kver#linux-image-}
        echo "== kernel $kver from $kdir ($(($(date +%s) - t0)) s)"

        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        mkdir "$work/results"
        truncate -s 4G "$work/scratch.img" # sparse: the guest's /tmp
        make_initramfs "$kdir" "$kver" "$work/initrd" || fail "cannot build the initramfs"
        echo "== booting qemu (timeout ${vm_timeout}s)"
        t0=$(date +%s)
        run_vm "$kdir" "$kver" "$work/initrd" || echo "== qemu exited with $? (124: timed out)"
        echo "== VM ran $(($(date +%s) - t0)) s, all took $(($(date +%s) - start)) s"
        summary
}

main "$@"
