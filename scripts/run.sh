#!/usr/bin/env bash
# The README's run command: installs what is needed, builds, and opens the workbench on the
# embedded default (bundled corpus, `small` preset, the default database).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bash "$here/scripts/setup.sh"
bash "$here/scripts/build.sh"
build="${SNIP_BUILD_DIR:-$here/build}"
if [ -x "$build/ui/snip-workbench" ] && { [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] || [ -n "${QT_QPA_PLATFORM:-}" ]; }; then
  exec "$build/ui/snip-workbench" "$@"
fi
echo "run: no display found; running the headless pipeline instead (snip train on the bundled corpus)"
exec "$build/app/snip" train --preset small "$@"
