#!/usr/bin/env bash
# Every test of container-mcp, in one run:
#   1. build, unit and native tests (meson test), and the native tests again
#      on cgroup v2 in a qemu VM (tests/vm/cgroup2.sh)
#   2. end-to-end tests with the official MCP SDK client over stdio, HTTP, SSE, Unix socket
#   3. the same unit and end-to-end tests on an ASan+UBSan build (LeakSanitizer on)
#   4. the unit tests under valgrind
#   5. the libFuzzer targets, briefly, from their seed corpora
#   6. a rotating sample of tests/mutations/ (scripts/mutants.sh, MUTANTS_SAMPLE=6)
# and a closing "N passed, N failed, N skipped" line over all of them: each
# cmocka case and each node test counts once, and every skip is listed with
# its reason.  Tests that could not be built count as failures.
#
#   scripts/check.sh              everything
#   CHECK_QUICK=1 scripts/check.sh   skip valgrind and fuzzing
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD

scripts/deps.sh --test || exit 1

passed=0 failed=0 skipped=0
failures=() skips=()

note() { printf '\n== %s\n' "$*"; }

# Count meson's results from its JSON test log, one per cmocka case.  The
# cmocka programs speak TAP (tests/tap.h, protocol 'tap'); meson 1.0's JSON
# log keeps only each program's verdict and its stdout, so the cases are
# read from that stdout: "ok", "ok ... # SKIP why", "not ok".  A program
# that skipped as a whole ("1..0 # SKIP why", or exit 77) is one skip; one
# that failed beyond its cases (a crash, a timeout, valgrind's exit 99, a
# short plan) is one more failure.  Prints "P|F|S<TAB>name<TAB>why" lines.
meson_cases() {
        python3 - "$1" <<'PY'
import json, re, sys
case = re.compile(r'^(not )?ok\b\s*(?:\d+\s*)?(?:-\s*)?([^#]*?)\s*(?:#\s*(SKIP|TODO)\S*\s*(.*))?$', re.I)
plan_skip = re.compile(r'^1\.\.0\s*#\s*SKIP\S*\s*(.*)$', re.I)
said_skip = re.compile(r'^SKIP:\s*(.*)$')
for line in open(sys.argv[1]):
    t = json.loads(line)
    name, res = t['name'], t['result']
    out, err = t.get('stdout') or '', t.get('stderr') or ''
    cases = bad = 0
    why = None
    for l in out.splitlines():
        m = case.match(l)
        if m:
            cases += 1
            n = name + ' / ' + (m.group(2) or 'case %d' % cases)
            if m.group(1):
                bad += 1
                print('F', n, 'failed', sep='\t')
            elif (m.group(3) or '').upper() == 'SKIP':
                print('S', n, m.group(4) or '(no reason given)', sep='\t')
            elif m.group(3):
                print('F', n, 'marked TODO', sep='\t')
            else:
                print('P', n, '', sep='\t')
            continue
        m = plan_skip.match(l)
        if m:
            why = m.group(1)
    if why is None:
        for l in (out + '\n' + err).splitlines():
            m = said_skip.match(l)
            if m:
                why = m.group(1)
    if res in ('OK', 'EXPECTEDFAIL'):
        if cases == 0:
            print('P', name, '', sep='\t')
    elif res == 'SKIP':
        if cases == 0:
            print('S', name, why or 'skipped without saying why', sep='\t')
    elif bad == 0:
        print('F', name, '%s (exit %s)' % (res, t.get('returncode')), sep='\t')
PY
}

count_meson() {
        local log=$1 label=$2 r name why
        [[ -f $log ]] || { failed=$((failed + 1)); failures+=("$label: no test log"); return; }
        while IFS=$'\t' read -r r name why; do
                case $r in
                P) passed=$((passed + 1)) ;;
                S) skipped=$((skipped + 1)); skips+=("$label: $name: $why") ;;
                *) failed=$((failed + 1)); failures+=("$label: $name: $why") ;;
                esac
        done < <(meson_cases "$log")
}

# Count node --test results from its summary lines; the skipped tests'
# reasons from their TAP lines ("ok N - name # SKIP why").  The VM's
# summary writes its skips unnumbered ("ok - name # SKIP why"): its console
# also shows the guest's own numbered TAP lines, which must not count twice.
count_node() {
        local out=$1 label=$2 num=${3-'[0-9]+ '} p f s line
        p=$(grep -E '^# pass [0-9]+' "$out" | tail -1 | awk '{print $3}')
        f=$(grep -E '^# fail [0-9]+' "$out" | tail -1 | awk '{print $3}')
        s=$(grep -E '^# skipped [0-9]+' "$out" | tail -1 | awk '{print $3}')
        if [[ -z $p ]]; then
                failed=$((failed + 1)); failures+=("$label: the suite did not run to its summary")
                return
        fi
        passed=$((passed + p)); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
        [[ ${f:-0} -gt 0 ]] && failures+=("$label: $f failed (see above)")
        while IFS= read -r line; do
                skips+=("$label: $line")
        done < <(sed -nE "s/^[[:space:]]*ok ${num}- (.*[^ ]) *# SKIP *(.*)\$/\\1: \\2/p" "$out")
}

# True when meson configured `dir` with the unit and native tests (it leaves
# them out when cmocka was missing at setup, as after `make run` on a fresh
# machine).
has_tests() {
        meson introspect "$1" --tests 2>/dev/null |
                python3 -c 'import json, sys
suites = {s.split(":")[-1] for t in json.load(sys.stdin) for s in t["suite"]}
sys.exit(0 if {"unit", "native"} <= suites else 1)'
}

build() { # dir, meson args...
        local dir=$1; shift
        if [[ ! -f $dir/build.ninja ]]; then
                meson setup "$dir" "$@" >/dev/null || return 1
        elif ! has_tests "$dir"; then
                # Configured before the test packages were installed: meson
                # keeps what it found missing, so configure afresh.
                echo "$dir was configured without the test packages; configuring it again"
                rm -rf "$dir"
                meson setup "$dir" "$@" >/dev/null || return 1
        fi
        ninja -C "$dir" >/dev/null || ninja -C "$dir" || return 1
        # Tests that could not be built are failures, not an empty suite.
        if ! has_tests "$dir"; then
                echo "$dir has no unit or native tests even after configuring afresh: is cmocka installed" \
                        "(apt-get install libcmocka-dev; scripts/deps.sh --test)?" >&2
                return 2
        fi
}

run_meson_tests() { # dir, label, extra meson test args...
        local dir=$1 label=$2; shift 2
        local log
        rm -f "$dir/meson-logs/$label".json "$dir/meson-logs/$label"-*.json
        meson test -C "$dir" --print-errorlogs --logbase "$label" "$@"
        # With --wrapper, meson names the log after the wrapper too.
        log=$(ls "$dir/meson-logs/$label".json "$dir/meson-logs/$label"-*.json 2>/dev/null | head -1)
        count_meson "${log:-$dir/meson-logs/$label.json}" "$label"
}

run_e2e() { # binary, label
        local out
        out=$(mktemp)
        CONTAINER_MCP_BIN=$1 tests/e2e/run.sh 2>&1 | tee "$out"
        count_node "$out" "$2"
        rm -f "$out"
}

run_vm() { # script, label: a VM run, counted from its "# pass N" lines
        local out
        out=$(mktemp)
        "$1" 2>&1 | tee "$out"
        count_node "$out" "$2" ''
        rm -f "$out"
}

note "build"
if ! build build; then
        note "summary"
        echo "FAILED: build: the build, or its unit and native tests, could not be made (see above)"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
fi

note "unit and native tests"
run_meson_tests build unit

note "native tests on cgroup v2 (qemu VM)"
run_vm "$top/tests/vm/cgroup2.sh" vm-cgroup2

note "end-to-end (official MCP SDK client)"
# The docker backend's tests need a Docker Engine and a Podman service of
# their own (tests/engines/start.sh; .ci/run starts them before this);
# without root they skip and say why.
if [[ $(id -u) -eq 0 && ! -s "${CM_ENGINES_DIR:-/tmp/cm-engines}/env" ]]; then
        "$top/tests/engines/start.sh" && trap '"$top/tests/engines/stop.sh"' EXIT
fi
run_e2e "$top/build/container-mcp" e2e

note "sanitizers (ASan + UBSan)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if build build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug; then
        run_meson_tests build-asan unit-asan --suite unit
        run_e2e "$top/build-asan/container-mcp" e2e-asan
else
        failed=$((failed + 1)); failures+=("asan build")
fi
unset ASAN_OPTIONS UBSAN_OPTIONS

if [[ -z ${CHECK_QUICK:-} ]]; then
        note "valgrind (unit tests)"
        run_meson_tests build unit-valgrind --suite unit \
                --wrapper 'valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect' \
                --timeout-multiplier 10

        note "fuzzing (libFuzzer, ${FUZZ_SECONDS:-20}s per target)"
        if CC=clang build build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false; then
                for f in build-fuzz/tests/fuzz_*; do
                        [[ -f $f && -x $f ]] || continue
                        name=${f##*/}
                        corpus=tests/fuzz/corpus/${name#fuzz_}
                        work=$(mktemp -d)
                        [[ -d $corpus ]] && cp -r "$corpus"/. "$work"/
                        if "$f" -max_total_time="${FUZZ_SECONDS:-20}" -max_len=65536 -rss_limit_mb=1024 \
                                -print_final_stats=0 "$work" >"$work.log" 2>&1; then
                                passed=$((passed + 1)); echo "$name: ok ($(grep -c . "$work.log") log lines)"
                        else
                                failed=$((failed + 1)); failures+=("$name: crashed, see below")
                                tail -40 "$work.log"
                        fi
                        rm -rf "$work" "$work.log"
                done
        else
                failed=$((failed + 1)); failures+=("fuzz build")
        fi
fi

# A few of tests/mutations/, a different few each day: each is a promise
# broken on purpose, which some test must then catch.
# MUTANTS_SAMPLE=0 skips the step.
note "mutations (rotating sample)"
if [[ ${MUTANTS_SAMPLE:-6} != 0 ]]; then
        mut_out=$(mktemp)
        MUTANTS_SAMPLE=${MUTANTS_SAMPLE:-6} scripts/mutants.sh 2>&1 | tee "$mut_out"
        mut_n=0
        while read -r outcome name _; do
                case $outcome in
                caught) passed=$((passed + 1)); mut_n=$((mut_n + 1)) ;;
                SURVIVED | STALE | BROKEN | FLAKY)
                        failed=$((failed + 1)); mut_n=$((mut_n + 1)); failures+=("mutation $name: $outcome") ;;
                esac
        done <"$mut_out"
        if ((mut_n == 0)); then
                failed=$((failed + 1)); failures+=("mutations: the harness ran none (see above)")
        fi
        rm -f "$mut_out"
fi

note "summary"
for f in "${skips[@]}"; do echo "SKIPPED: $f"; done
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
