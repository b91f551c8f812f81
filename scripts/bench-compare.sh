#!/usr/bin/env bash
# Runs the speed figures of two `nmcp` binaries back to back, alternating, so machine load
# affects both alike: DRAM requests/s (1 M-request stream and random) and the wall time of
# a full BERT-Large LAMB step. Usage: scripts/bench-compare.sh OLD_NMCP NEW_NMCP [ROUNDS]
set -euo pipefail
old=$1; new=$2; rounds=${3:-2}
for r in $(seq "$rounds"); do
  for bin in "$old" "$new"; do
    tag=$([ "$bin" = "$old" ] && echo before || echo after)
    s=$("$bin" mem --pattern stream | sed -n 's/.* = \([0-9.]*\) M requests\/s.*/\1/p')
    x=$("$bin" mem --pattern random | sed -n 's/.* = \([0-9.]*\) M requests\/s.*/\1/p')
    l=$( { /usr/bin/time -f "%e" "$bin" lamb > /dev/null; } 2>&1 | tail -1)
    echo "round $r $tag: stream ${s} M req/s, random ${x} M req/s, BERT-Large LAMB step ${l} s wall"
  done
done
