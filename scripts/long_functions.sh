#!/usr/bin/env bash
# Lists every function (lambdas excluded) longer than LIMIT (default 80) lines in the
# sources (engine/ storage/ session/ app/ ui/ bench/; not tests/, not build/),
# longest first. Needs universal-ctags (apt-get install universal-ctags).
#   bash scripts/long_functions.sh [--check] [LIMIT]   (--check: exit 1 when any is listed; a test)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
limit="${1:-80}"
cd "$here"
if ! command -v ctags >/dev/null; then
  echo "long_functions: ctags is not installed (bash scripts/setup.sh installs universal-ctags)" >&2
  exit 1
fi
found=$(
ctags --fields=+ne -o - --kinds-C++=f --languages=C++ -R engine storage session app ui bench |
  awk -F'\t' -v limit="$limit" '
    $1 ~ /^__anon/ { next }
    {
      line = ""; end = ""; scope = ""
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) line = substr($i, 6)
        else if ($i ~ /^end:/) end = substr($i, 5)
        else if ($i ~ /^(class|struct|namespace):/) { scope = $i; sub(/^[a-z]+:/, "", scope) }
      }
      if (line == "" || end == "") next
      n = end - line + 1
      name = (scope == "" ? $1 : scope "::" $1)
      if (n > limit) printf "%5d  %s:%s  %s\n", n, $2, line, name
    }' | sort -rn)
if [ -n "$found" ]; then
  echo "$found"
  if [ "$check" = 1 ]; then
    echo "long_functions: functions longer than $limit lines: split them (each does one thing)" >&2
    exit 1
  fi
fi
