#!/usr/bin/env bash
# Bounded libFuzzer run of every parser of outside input: builds the fuzz targets with
# clang + ASan + UBSan in build-fuzz, runs each for SECONDS (default 60) on a copy of its seed
# corpus (tests/fuzz/corpus/<target>/), and prints one table row per target: executions, time,
# corpus growth, and the crash file if it found one. Exit status 1 when any target crashed.
#   scripts/fuzz.sh [SECONDS]     env: SNIP_FUZZ_TARGETS="plan stats" to run a subset, JOBS=2 (build),
#   SNIP_FUZZ_KEEP_GOING=1 to keep fuzzing after a crash (libFuzzer -fork=1 -ignore_crashes=1) and
#   report the distinct crash messages, to see what else hides behind a known bug.
# Crash inputs kept in tests/fuzz/regressions/<target>/ are replayed first; any that still crashes
# makes the exit status 1.
set -euo pipefail
seconds="${1:-60}"
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${SNIP_FUZZ_BUILD_DIR:-$here/build-fuzz}"
jobs="${JOBS:-2}"
targets=(${SNIP_FUZZ_TARGETS:-safetensors config token_file plan stats costs_csv store})

# The whole tree is compiled by clang with the sanitizers (SNIP_ASAN) and libFuzzer's coverage
# instrumentation (fuzzer-no-link); only the fuzz_* executables link libFuzzer's main.
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link -g" -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link -g" \
  -DSNIP_ASAN=ON -DSNIP_FUZZ=ON -DSNIP_BUILD_GUI=OFF -DSNIP_BUILD_BENCH=OFF >/dev/null
ninja -C "$build" -j "$jobs" "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
keep_going=()
if [ "${SNIP_FUZZ_KEEP_GOING:-0}" = 1 ]; then keep_going=(-fork=1 -ignore_crashes=1); fi
rows=()
status=0
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t"
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
  cp "$here/tests/fuzz/corpus/$t/"* "$work/corpus/"
  seeds=$(ls "$work/corpus" | wc -l)
  # Replay the crash inputs found earlier (tests/fuzz/regressions/<target>/): each must now pass.
  regr=""
  if [ -d "$here/tests/fuzz/regressions/$t" ]; then
    n=0 bad=0
    for f in "$here/tests/fuzz/regressions/$t/"*; do
      n=$((n + 1))
      "$build/tests/fuzz/fuzz_$t" "$f" >/dev/null 2>&1 || bad=$((bad + 1))
    done
    regr="; regressions: $bad of $n still crash"
    [ "$bad" -eq 0 ] || status=1
  fi
  echo "== fuzz_$t for ${seconds}s ($seeds seeds)"
  start=$(date +%s)
  set +e
  "$build/tests/fuzz/fuzz_$t" "$work/corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=131072 -print_final_stats=1 -artifact_prefix="$work/artifacts/" "${keep_going[@]}" >"$work/log.txt" 2>&1
  rc=$?
  set -e
  took=$(( $(date +%s) - start ))
  # (|| true: a log without these lines must not end the script under pipefail)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log.txt" | grep -o '[0-9]*$' | tail -1 || true)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$work/log.txt" | tail -1 | tr -d '#' || true)
  finds=$(ls "$work/corpus" | wc -l)
  crash=$(ls "$work/artifacts" 2>/dev/null | head -1)
  ncrash=$(ls "$work/artifacts" 2>/dev/null | wc -l)
  if [ "$rc" -ne 0 ] || [ -n "$crash" ]; then
    status=1
    result="CRASH rc=$rc, $ncrash crash file(s) ${crash:+e.g. $work/artifacts/$crash}"
    # The distinct causes (uncaught exception text, sanitizer summary), most frequent first.
    grep -E '^ +what\(\)|^SUMMARY|runtime error' "$work/log.txt" | sed -E "s/'[^']*'/'…'/g" | sort | uniq -c | sort -rn | head -5 || true
  else
    result="clean"
  fi
  rows+=("$(printf '%-12s %10s %6ss %7s -> %-6s %s%s' "$t" "${execs:-?}" "$took" "$seeds" "$finds" "$result" "$regr")")
done
echo
printf '%-12s %10s %7s %18s %s\n' target executions time "corpus (seeds->)" result
printf '%s\n' "${rows[@]}"
exit $status
