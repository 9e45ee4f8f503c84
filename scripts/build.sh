#!/usr/bin/env bash
# Configures and builds SNIP Workbench (Release) into ${SNIP_BUILD_DIR:-build}.
# Arguments name the targets to build (scripts/run.sh: the two programs); none builds everything
# (the tests and benchmarks too).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${SNIP_BUILD_DIR:-$here/build}"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${SNIP_CMAKE_ARGS:-} >/dev/null
targets=()
if [ $# -gt 0 ]; then targets=(--target "$@"); fi
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
