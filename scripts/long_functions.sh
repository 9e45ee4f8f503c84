#!/usr/bin/env bash
# Lists every function (lambdas excluded) longer than ${1:-80} lines in the
# product sources (engine/ storage/ session/ app/ ui/; not tests/, not build/),
# longest first. Needs universal-ctags (apt-get install universal-ctags).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
limit="${1:-80}"
cd "$here"
ctags --fields=+ne -o - --kinds-C++=f --languages=C++ -R engine storage session app ui |
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
    }' | sort -rn
