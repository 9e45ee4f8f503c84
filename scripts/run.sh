#!/usr/bin/env bash
# The README's run command: installs what is needed, builds, and opens the workbench on the
# embedded default (bundled corpus, `small` preset, the default database).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bash "$here/scripts/setup.sh"
build="${SNIP_BUILD_DIR:-$here/build}"
# Only what this command runs (the CLI and the GUI and what they link); scripts/test.sh builds the
# tests and benchmarks too.
targets=(snip)
case " ${SNIP_CMAKE_ARGS:-} $(grep -s '^SNIP_BUILD_GUI:BOOL=' "$build/CMakeCache.txt" || true)" in
  *SNIP_BUILD_GUI=OFF* | *SNIP_BUILD_GUI:BOOL=OFF*) ;;
  *) targets+=(snip-workbench) ;;
esac
bash "$here/scripts/build.sh" "${targets[@]}"
if [ -x "$build/ui/snip-workbench" ] && { [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] || [ -n "${QT_QPA_PLATFORM:-}" ]; }; then
  exec "$build/ui/snip-workbench" "$@"
fi
echo "run: no display found; running the headless pipeline instead (snip train on the bundled corpus)"
exec "$build/app/snip" train --preset small "$@"
