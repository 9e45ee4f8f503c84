#!/usr/bin/env bash
# Regenerates kjv.txt.gz (the bundled corpus) from Debian's bible-kjv package:
# every verse from Genesis 1:1 to Revelation 22:21, one verse per line ("N text"),
# a "Book C" heading before each chapter, chapters separated by a blank line. ASCII only.
# Needs: apt-get install -y bible-kjv. Output is byte-for-byte reproducible (gzip -n).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
COLUMNS=100000 bible -l100000 "gen1:1-rev22:21" \
  | sed -e 's/^ *//' -e 's/[[:space:]]*$//' \
  | cat -s \
  | sed -e '1{/^$/d}' \
  | LC_ALL=C tr -cd '\n\040-\176' \
  | gzip -n -9 > "$here/kjv.txt.gz"
echo "wrote $here/kjv.txt.gz: $(zcat "$here/kjv.txt.gz" | wc -c) bytes of text, $(stat -c %s "$here/kjv.txt.gz") compressed"
