#!/usr/bin/env bash
# Sanitizer runs of the test suite, each in its own build directory, gcc, -O1 -g
# (top-level CMakeLists.txt), GUI, benchmarks and fuzzers not built:
#   asan: -DSNIP_ASAN=ON (AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer with
#         -fno-sanitize-recover=all), build-asan: every test binary and `snip` (which the CLI
#         tests run, so it is checked too), then every test except the labels `slow` and `gui`
#         and the PyTorch bridge tests (Python + torch under an ASan `snip` would dominate the run
#         and test Python, not this code; the normal suite runs them).
#   tsan: -DSNIP_TSAN=ON, build-tsan: the suites that run code on several threads: the quantizer's
#         fork-join and the thread pools (ThreadPool, Stochastic, QLinear, FastVsRef, Blocks, OpsFast,
#         OpsGrad, Model), the trainer stopped from another thread (Trainer), stores shared between
#         threads and processes (StoreConcurrency, StoreCrash, RunRecorder), the integer and BF16
#         GEMM kernels on the pool (QGemm, QGemmBf16), a compare's parallel trainings
#         (Compare.ParallelJobsGiveTheBitsOfOneJob) and the statistics round's residual maps run
#         concurrently and its noise passes' sums alongside the next draws (StatsRound.Concurrent*,
#         StatsRound.SameBitsOnOneThreadAsOnThePool).
# A sanitizer report anywhere (a test binary or a `snip` it runs) fails the run: reports are
# written to <build>/sanitizer-reports/ (log_path) and any file there is a failure, even when the
# test that ran the reporting process passed. Prints the wall time of each part.
#   scripts/sanitize.sh [asan|tsan|all]     env: JOBS (default 2), NICE (default 0)
set -uo pipefail
what="${1:-all}"
here="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${JOBS:-2}"
nice_level="${NICE:-0}"
status=0
summary=()
# A throw-away default database for tests that run `snip` without --db (see scripts/test.sh).
XDG_DATA_HOME="$(mktemp -d)"
export XDG_DATA_HOME
trap 'rm -rf "$XDG_DATA_HOME"' EXIT

run_part() {  # name build_dir cmake_flags(array name) ctest_args(array name) target_filter
  local name=$1 build=$2
  local -n flags=$3 cargs=$4
  local filter=$5
  local start rc=0 built end
  start=$(date +%s)
  local reports="$build/sanitizer-reports"
  echo "== $name: configure + build in $build"
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSNIP_BUILD_GUI=OFF \
    -DSNIP_BUILD_BENCH=OFF -DSNIP_FUZZ=OFF "${flags[@]}" >"$build.configure.log" 2>&1 || {
    cat "$build.configure.log"
    rc=1
  }
  local targets=()
  if [ $rc -eq 0 ]; then
    # Only the test binaries (and `snip`, which they run): never the GUI, benchmarks or fuzzers.
    mapfile -t targets < <(ninja -C "$build" -t targets all | sed -n 's/^\(test_[a-z_]*\): phony$/\1/p' |
      grep -Ev '_slow$' | grep -E "$filter")
    targets+=(snip)
    echo "== $name: building ${targets[*]}"
    rm -rf "$reports"
    mkdir -p "$reports"
    nice -n "$nice_level" ninja -C "$build" -j "$jobs" "${targets[@]}" || rc=1
  fi
  built=$(date +%s)
  if [ $rc -eq 0 ]; then
    echo "== $name: ctest ${cargs[*]}"
    ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 1200 "${cargs[@]}" 2>&1 |
      tee "$build/sanitize-ctest.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    grep -q "No tests were found" "$build/sanitize-ctest.log" && rc=1
  fi
  end=$(date +%s)
  local nrep
  nrep=$(find "$reports" -type f 2>/dev/null | wc -l)
  if [ "$nrep" -gt 0 ]; then
    rc=1
    echo "== $name: $nrep sanitizer report file(s) in $reports:"
    for f in $(find "$reports" -type f | head -5); do
      echo "---- $f"
      head -60 "$f"
    done
  fi
  summary+=("$(printf '%-5s build %5ss  tests %5ss  %s' "$name" $((built - start)) $((end - built)) \
    "$([ $rc -eq 0 ] && echo "clean (no sanitizer report)" || echo FAILED)")")
  [ $rc -eq 0 ] || status=1
}

if [ "$what" = asan ] || [ "$what" = all ]; then
  build="${SNIP_ASAN_BUILD_DIR:-$here/build-asan}"
  mkdir -p "$build"
  # halt_on_error/abort_on_error: the first report ends the process with a failure; detect_leaks:
  # LeakSanitizer at exit; log_path: every report also lands in a file (see above).
  export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0:log_path=$build/sanitizer-reports/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$build/sanitizer-reports/ubsan"
  asan_flags=(-DSNIP_ASAN=ON -DSNIP_TSAN=OFF)
  asan_ctest=(-LE "slow|gui|emulated|slurm" -E "^pytorch\.|_NOT_BUILT$")
  run_part asan "$build" asan_flags asan_ctest '.'
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

if [ "$what" = tsan ] || [ "$what" = all ]; then
  build="${SNIP_TSAN_BUILD_DIR:-$here/build-tsan}"
  mkdir -p "$build"
  export TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:log_path=$build/sanitizer-reports/tsan"
  # OpenBLAS is not instrumented: its own worker threads synchronize with spin-waits TSan cannot
  # see, which would be reported as races inside libopenblas. With one OpenBLAS thread every GEMM
  # runs on the calling thread, so all threads TSan watches are this project's (the model's pool
  # with SNIP_NUM_THREADS=3, i.e. two workers even on a machine with fewer cores, and the
  # quantizer's fork-join). No suppression file is needed.
  export OPENBLAS_NUM_THREADS=1 SNIP_NUM_THREADS=3
  tsan_flags=(-DSNIP_TSAN=ON -DSNIP_ASAN=OFF)
  tsan_ctest=(-L unit -R "^(ThreadPool|Stochastic|QLinear|QGemm|QGemmBf16|FastVsRef|Blocks|OpsFast|OpsGrad|Model|Trainer|StoreConcurrency|StoreCrash|RunRecorder)\.|^Compare\.ParallelJobsGiveTheBitsOfOneJob$|^StatsRound\.(ConcurrentResidualMapsGiveTheSerialBits|SameBitsOnOneThreadAsOnThePool)$")
  run_part tsan "$build" tsan_flags tsan_ctest '^test_(numerics|model|train|storage|studies)$'
  unset TSAN_OPTIONS OPENBLAS_NUM_THREADS SNIP_NUM_THREADS
fi

echo
printf '%s\n' "${summary[@]}"
exit $status
