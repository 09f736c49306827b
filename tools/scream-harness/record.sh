#!/bin/sh
# Regenerates tests/golden/scream/*.csv from SCReAM's own C++ code.
# usage: tools/scream-harness/record.sh <scream git dir> [commit]
#   <scream git dir>: a clone or bare mirror of github.com/EricssonResearch/scream
#   commit: default 76a298add1eb (2024-10-31, the commit named by the test record of that
#           date; e0af5ef, the day's last commit, only edits test-record.md)
set -eu
GIT_DIR_SRC=${1:?usage: record.sh <scream git dir> [commit]}
COMMIT=${2:-76a298add1ebd3714f86ae6f4a31194ca04a168f}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
git --git-dir="$GIT_DIR_SRC" archive "$COMMIT" code | tar -x -C "$WORK"
C="$WORK/code"
g++ -O2 -std=c++17 -w -I"$C" -o "$WORK/harness" "$HERE/harness.cpp" \
    "$C/ScreamV2Tx.cpp" "$C/ScreamV2TxStream.cpp" "$C/ScreamTx.cpp" "$C/RtpQueue.cpp"
OUT="$REPO/tests/golden/scream"
mkdir -p "$OUT"
grep -v '^#' "$HERE/scripts.txt" | while read -r name args; do
    [ -n "$name" ] || continue
    {
        echo "# scream $COMMIT harness: $args"
        "$WORK/harness" $args 2>/dev/null
    } > "$OUT/$name.csv"
    echo "$OUT/$name.csv"
done
