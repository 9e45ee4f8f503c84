#!/usr/bin/env bash
# The README's test command: installs what is needed, builds, runs the whole test suite.
# SNIP_SLOW=1 also runs the tests labelled `slow`.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bash "$here/scripts/setup.sh"
bash "$here/scripts/build.sh"
build="${SNIP_BUILD_DIR:-$here/build}"
exclude=()
if [ "${SNIP_SLOW:-0}" != "1" ]; then exclude=(-LE slow); fi
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${exclude[@]}"
