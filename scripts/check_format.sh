#!/usr/bin/env bash
# Checks that every tracked C++ file is formatted as .clang-format says (Debian 12's
# clang-format 14). Run by the test suite (test `format.clang_format`); fix with
#   git ls-files '*.cpp' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format is not installed (bash scripts/setup.sh installs it)" >&2
  exit 2
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check_format: not a git checkout; nothing to check"
  exit 0
fi
# One clang-format process for every file (one per file took minutes on a loaded machine).
mapfile -t files < <(git ls-files '*.cpp' '*.h' | while IFS= read -r f; do [ -f "$f" ] && echo "$f"; done)
report="$(clang-format --dry-run --Werror "${files[@]}" 2>&1 || true)"
mapfile -t bad < <(printf '%s\n' "$report" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error:.*/\1/p' | sort -u)
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) differ from .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
