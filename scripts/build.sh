#!/usr/bin/env bash
# Configures and builds SNIP Workbench (Release) into ${SNIP_BUILD_DIR:-build}.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${SNIP_BUILD_DIR:-$here/build}"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${SNIP_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$(nproc)"
