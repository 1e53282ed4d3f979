#!/usr/bin/env bash
# Mutation testing: break one promise of the README on purpose, rebuild, and
# check that the tests meant to guard it fail.  Each mutation is a file in
# tests/mutations/ (format in tests/mutations/README.md).
#
#   scripts/mutants.sh [NAME...]     every mutation, or only the named ones
#   MUTANTS_SAMPLE=K                 a sample of K, rotating by day (UTC)
#   MUTANTS_FULL=1                   run every unit, native and e2e test per
#                                    mutation instead of the named ones (slow)
#   MUTANTS_BASELINE=1               first run the named tests unmutated; stop
#                                    if any fails (a failing test catches all)
#   MUTANTS_KEEP=1                   keep the scratch copy and its logs
#   MUTANTS_CONFIRM=0                trust a failing test without rerunning
#                                    it on the restored tree
#
# The tree (git ls-files, as in the work tree now) is copied once to a
# scratch dir and built there; per mutation: apply, ninja (incremental), run
# its tests, restore.  Outcome per mutation:
#   caught    at least one named test failed
#   SURVIVED  every named test passed (or none of them exists)
#   FLAKY     a test failed, but fails without the mutation too
#   STALE     the search text is not in the file exactly once
#   BROKEN    the mutated tree does not build
# and a closing "N caught, M survived" line.  Exit 0 only when all were caught.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
mutdir=$top/tests/mutations

mapfile -t all < <(cd "$mutdir" && ls -1 ./*.mut 2>/dev/null | sed 's|^\./||; s|\.mut$||' | LC_ALL=C sort)
if ((${#all[@]} == 0)); then
        echo "mutants: no mutations in $mutdir" >&2
        exit 2
fi

# Which mutations: named ones, a rotating sample, or all.
selected=()
if (($# > 0)); then
        for n in "$@"; do
                n=${n%.mut}; n=${n##*/}
                [[ -f $mutdir/$n.mut ]] || { echo "mutants: no mutation \"$n\" in tests/mutations" >&2; exit 2; }
                selected+=("$n")
        done
elif [[ -n ${MUTANTS_SAMPLE:-} ]]; then
        k=$MUTANTS_SAMPLE n=${#all[@]}
        [[ $k =~ ^[0-9]+$ ]] || { echo "mutants: MUTANTS_SAMPLE=$k: expected a number of mutations" >&2; exit 2; }
        ((k > n)) && k=$n
        # Day number since the epoch: the same sample all day, the next K tomorrow.
        day=$(($(date -u +%s) / 86400))
        start=$(((day * k) % n))
        for ((i = 0; i < k; i++)); do selected+=("${all[(start + i) % n]}"); done
        echo "mutants: sample of $k of $n for day $day: ${selected[*]}"
else
        selected=("${all[@]}")
fi

scratch=$(mktemp -d /tmp/container-mcp-mutants.XXXXXX)
# The native tests also run as nobody: the scratch tree must be reachable.
chmod 755 "$scratch"
cleanup() { [[ -n ${MUTANTS_KEEP:-} ]] && echo "mutants: kept $scratch" || rm -rf "$scratch"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

src=$scratch/src-tree
mkdir -p "$src" "$scratch/logs"
git ls-files -z | (cd "$top" && xargs -0 cp --parents -t "$src") || { echo "mutants: copying the tree failed" >&2; exit 2; }
chmod -R go+rX "$src"
# The e2e client (node_modules) is not in git: share the work tree's.
if [[ -d $top/tests/e2e/node_modules ]]; then
        ln -s "$top/tests/e2e/node_modules" "$src/tests/e2e/node_modules"
elif ! (cd "$src/tests/e2e" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
        echo "mutants: npm ci in tests/e2e failed; the e2e tests cannot run" >&2
fi

echo "mutants: building a scratch copy in $src"
t0=$(date +%s)
if ! (cd "$src" && meson setup build >"$scratch/logs/setup.log" 2>&1 && ninja -C build >"$scratch/logs/build.log" 2>&1); then
        cat "$scratch/logs/setup.log" "$scratch/logs/build.log" 2>/dev/null | tail -30
        echo "mutants: the unmutated tree does not build" >&2
        exit 2
fi
# Each meson test's name and executable (relative to build/): a mutation
# rebuilds only what its tests run, not every test program.
declare -A test_exe=()
meson_tests=()
while read -r t exe; do
        test_exe[$t]=$exe
        meson_tests+=("$t")
done < <(meson introspect "$src/build" --tests | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    print(t["name"], os.path.relpath(t["cmd"][0], sys.argv[1]))' "$src/build")
echo "mutants: built in $(($(date +%s) - t0)) s; ${#meson_tests[@]} meson tests"

have_meson_test() { [[ -n ${test_exe[$1]:-} ]]; }

# The ninja targets for a list of tests: the server for e2e, the test
# programs for meson tests; everything under MUTANTS_FULL.
targets_of() {
        local t
        [[ -n ${MUTANTS_FULL:-} ]] && return
        echo container-mcp
        for t in "$@"; do
                [[ $t != e2e:* ]] && have_meson_test "$t" && echo "${test_exe[$t]}"
        done | LC_ALL=C sort -u
}

# mut.py FILE apply|restore|field NAME: the one parser of the format.
mutpy=$top/tests/mutations/mut.py

# Run meson tests by name and e2e files; print the failing ones, return 0
# when some failed.  $1: log file; rest: test names.
run_tests() {
        local log=$1; shift
        local meson_names=() e2e_files=() t failed=() missing=()
        for t in "$@"; do
                case $t in
                e2e:*)
                        if [[ -f $src/tests/e2e/${t#e2e:} ]]; then e2e_files+=("${t#e2e:}"); else missing+=("$t"); fi ;;
                *)
                        if have_meson_test "$t"; then meson_names+=("$t"); else missing+=("$t"); fi ;;
                esac
        done
        ((${#missing[@]})) && echo "missing tests (not counted): ${missing[*]}" >>"$log"
        if ((${#meson_names[@]})); then
                rm -f "$src/build/meson-logs/mut.json"
                meson test -C "$src/build" --no-rebuild --print-errorlogs --logbase mut "${meson_names[@]}" >>"$log" 2>&1
                while read -r r name; do
                        case $r in OK | SKIP | EXPECTEDFAIL) ;; *) failed+=("$name") ;; esac
                done < <(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    print(t["result"], t["name"].split(" / ")[-1])' "$src/build/meson-logs/mut.json" 2>/dev/null)
        fi
        for t in "${e2e_files[@]}"; do
                # A hang counts as a failure: generous, so load never decides.
                if ! (cd "$src/tests/e2e" && CONTAINER_MCP_BIN=$src/build/container-mcp timeout 900 \
                        node --test --test-reporter=tap --test-reporter-destination=stdout "./$t") >>"$log" 2>&1; then
                        failed+=("e2e:$t")
                fi
        done
        ((${#failed[@]})) || return 1
        echo "${failed[*]}"
}

all_tests() {
        local t
        for t in "${meson_tests[@]}"; do echo "$t"; done
        (cd "$src/tests/e2e" && ls -1 ./*.test.mjs | sed 's|^\./|e2e:|')
}

tests_of() { # name: the tests a mutation runs
        if [[ -n ${MUTANTS_FULL:-} ]]; then all_tests; else python3 "$mutpy" "$mutdir/$1.mut" tests; fi
}

if [[ -n ${MUTANTS_BASELINE:-} ]]; then
        mapfile -t base < <(for n in "${selected[@]}"; do tests_of "$n"; done | LC_ALL=C sort -u)
        echo "mutants: baseline, unmutated: ${base[*]}"
        if out=$(run_tests "$scratch/logs/baseline.log" "${base[@]}"); then
                tail -60 "$scratch/logs/baseline.log"
                echo "mutants: without any mutation these fail: $out; fix them first" >&2
                exit 2
        fi
fi

caught=0 survived=0 survivors=()
t_all=$(date +%s)
for n in "${selected[@]}"; do
        m=$mutdir/$n.mut
        log=$scratch/logs/$n.log
        t0=$(date +%s) restored=0 still=
        file=$(python3 "$mutpy" "$m" file)
        if ! python3 "$mutpy" "$m" apply "$src" >"$log" 2>&1; then
                printf '%-9s %-34s %s\n' STALE "$n" "$(tail -1 "$log")"
                survived=$((survived + 1)); survivors+=("$n (stale)")
                continue
        fi
        mapfile -t tests < <(tests_of "$n")
        mapfile -t targets < <(targets_of "${tests[@]}")
        if ! ninja -C "$src/build" "${targets[@]}" >>"$log" 2>&1; then
                printf '%-9s %-34s does not build: %s\n' BROKEN "$n" "$(grep -m1 -E 'error:' "$log")"
                survived=$((survived + 1)); survivors+=("$n (broken)")
        else
                if by=$(run_tests "$log" "${tests[@]}"); then
                        # Only a test that passes without the mutation caught
                        # it: rerun the failing ones on the restored tree
                        # (a test that fails anyway, or failed from load or
                        # another run's interference, proves nothing).
                        python3 "$mutpy" "$m" restore "$src" || { echo "mutants: cannot restore $file" >&2; exit 2; }
                        restored=1
                        read -ra again <<<"$by"
                        if [[ ${MUTANTS_CONFIRM:-1} == 0 ]] || { ninja -C "$src/build" "${targets[@]}" >>"$log" 2>&1 &&
                                ! still=$(run_tests "$log.confirm" "${again[@]}"); }; then
                                printf '%-9s %-34s %4d s  by %s\n' caught "$n" $(($(date +%s) - t0)) "$by"
                                caught=$((caught + 1))
                        else
                                printf '%-9s %-34s %4d s  %s fail(s) without the mutation too\n' FLAKY "$n" \
                                        $(($(date +%s) - t0)) "${still:-the build}"
                                survived=$((survived + 1)); survivors+=("$n (flaky: ${still:-build})")
                        fi
                else
                        printf '%-9s %-34s %4d s  %s passed\n' SURVIVED "$n" $(($(date +%s) - t0)) "${tests[*]}"
                        grep -h '^missing tests' "$log" | sed 's/^/          /'
                        survived=$((survived + 1)); survivors+=("$n")
                fi
        fi
        ((restored)) || python3 "$mutpy" "$m" restore "$src" || { echo "mutants: cannot restore $file" >&2; exit 2; }
done
# Leave the scratch build unmutated (for MUTANTS_KEEP).
ninja -C "$src/build" >/dev/null 2>&1

echo "mutants: ${#selected[@]} mutations in $(($(date +%s) - t_all)) s"
if ((survived)); then
        echo "$caught caught, $survived survived: ${survivors[*]}"
        exit 1
fi
echo "$caught caught, $survived survived"
