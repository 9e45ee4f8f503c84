#!/usr/bin/env bash
# Sanitizer runs of the test suite (issue 7), each in its own build directory:
#   asan: gcc, -DSNIP_ASAN=ON (AddressSanitizer + UndefinedBehaviorSanitizer, any report aborts
#         the test), build-asan, every test except those labelled slow (and gui unless the GUI
#         is built: SNIP_SANITIZE_GUI=1).
#   tsan: gcc, -DSNIP_TSAN=ON, build-tsan, the tests that run code on several threads: the
#         quantizer's and the model's thread pools (numerics, model), the trainer stopped from
#         another thread (train), and stores opened per thread / process (storage).
# Prints the wall time of each part. Exit status 1 when a test fails or a sanitizer reports.
#   scripts/sanitize.sh [asan|tsan|all]     env: JOBS (default 2)
set -uo pipefail
what="${1:-all}"
here="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${JOBS:-2}"
status=0
summary=()

# Sanitizer reports must fail the test that caused them, not only print.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"

run_part() {  # name build_dir cmake_flags(array name) ninja_targets(array name) ctest_args(array name)
  local name=$1 build=$2
  local -n flags=$3 targets=$4 cargs=$5
  local start=$(date +%s) rc=0
  echo "== $name: configure + build in $build"
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${flags[@]}" >/dev/null || rc=1
  [ $rc -eq 0 ] && { ninja -C "$build" -j "$jobs" "${targets[@]}" || rc=1; }
  local built=$(date +%s)
  if [ $rc -eq 0 ]; then
    echo "== $name: ctest ${cargs[*]}"
    ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 900 "${cargs[@]}" 2>&1 | tee "$build/sanitize-ctest.log" || rc=1
    grep -q "tests failed" "$build/sanitize-ctest.log" && rc=1
    grep -E "ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer|ERROR: LeakSanitizer" "$build/sanitize-ctest.log" | sort | uniq -c | head -20
  fi
  local end=$(date +%s)
  summary+=("$(printf '%-5s build %5ss  tests %5ss  %s' "$name" $((built - start)) $((end - built)) "$([ $rc -eq 0 ] && echo clean || echo FAILED)")")
  [ $rc -eq 0 ] || status=1
}

if [ "$what" = asan ] || [ "$what" = all ]; then
  gui="${SNIP_SANITIZE_GUI:-0}"
  asan_flags=(-DSNIP_ASAN=ON -DSNIP_BUILD_BENCH=OFF -DSNIP_BUILD_GUI=$([ "$gui" = 1 ] && echo ON || echo OFF))
  asan_targets=(all)
  asan_ctest=(-LE "slow")
  run_part asan "${SNIP_ASAN_BUILD_DIR:-$here/build-asan}" asan_flags asan_targets asan_ctest
fi

if [ "$what" = tsan ] || [ "$what" = all ]; then
  tsan_flags=(-DSNIP_TSAN=ON -DSNIP_BUILD_BENCH=OFF -DSNIP_BUILD_GUI=OFF)
  tsan_targets=(test_numerics test_model test_train test_storage)
  # Threaded code paths only: the quantizer/GEMM thread pools, the model's parallel ops, the
  # trainer's stop flag, stores shared between threads and processes.
  tsan_ctest=(-L unit -R "^(Stochastic|QLinear|FastVsRef|Blocks|OpsFast|OpsGrad|Model|Trainer|StoreConcurrency|StoreCrash|Recorder|RunRecorder)\.")
  run_part tsan "${SNIP_TSAN_BUILD_DIR:-$here/build-tsan}" tsan_flags tsan_targets tsan_ctest
fi

echo
printf '%s\n' "${summary[@]}"
exit $status
