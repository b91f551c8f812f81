#!/usr/bin/env bash
# Compares nmcp binaries on the hot paths by the two measures a shared machine does not
# spoil together: instructions executed (valgrind's cachegrind `I refs`, exact and
# immune to other load) and CPU seconds, the median of ROUNDS runs taken in turn
# (binary A, B, C, A, B, C, ...) so that load drifts over all alike.
# Usage: scripts/bench-instructions.sh ROUNDS NAME=BIN [NAME=BIN ...]
# (IR=0 in the environment skips cachegrind; the instructions column is then empty.)
# Prints one TSV row per case and binary: case, name, instructions, median CPU s, runs.
set -euo pipefail
rounds=$1; shift
declare -a names bins
for nb in "$@"; do names+=("${nb%%=*}"); bins+=("${nb#*=}"); done

# The cases: the DRAM and NMC hot paths `nmcp bench` runs, as NAME|CACHEGRIND ARGS|CPU
# ARGS: the instruction count on a run that takes seconds to a minute under cachegrind,
# the CPU time on one ten times as long, so that it is well above the clock's 10 ms
# resolution (`nmcp bench`'s T3 case takes tens of minutes under cachegrind).
cases=(
  "mem-stream|mem --requests 200000 --json|mem --requests 2000000 --json"
  "mem-random|mem --requests 200000 --pattern random --json|mem --requests 2000000 --pattern random --json"
  "lamb-column-triggered|lamb --layers 2 --alu-models column-triggered --json|lamb --alu-models column-triggered --json"
)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cpu_seconds() { # BIN ARGS...: user+sys CPU seconds of one run
  /usr/bin/time -f "%U %S" -o "$tmp/time" "$@" > /dev/null 2> /dev/null
  awk '{printf "%.3f", $1 + $2}' "$tmp/time"
}

for c in "${cases[@]}"; do
  name=${c%%|*}; rest=${c#*|}; args=${rest%%|*}; cpu_args=${rest#*|}
  declare -A samples=()
  for r in $(seq "$rounds"); do
    for i in "${!bins[@]}"; do
      # shellcheck disable=SC2086
      samples[$i]+="$(cpu_seconds "${bins[$i]}" $cpu_args) "
    done
  done
  for i in "${!bins[@]}"; do
    # shellcheck disable=SC2086
    ir=
    if [ "${IR:-1}" != 0 ]; then
      valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$tmp/cg" \
        "${bins[$i]}" $args > /dev/null 2> "$tmp/vg"
      ir=$(sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$tmp/vg" | tr -d ,)
    fi
    med=$(tr ' ' '\n' <<< "${samples[$i]}" | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "${names[$i]}" "$ir" "$med" "${samples[$i]% }"
  done
  unset samples
done
