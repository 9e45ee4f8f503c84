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
# Tests that run `snip` without --db would record into the user's default database
# ($XDG_DATA_HOME/snip-workbench/workbench.db, the one the GUI opens): give them a throw-away one.
XDG_DATA_HOME="$(mktemp -d)"
export XDG_DATA_HOME
trap 'rm -rf "$XDG_DATA_HOME"' EXIT
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${exclude[@]}"
