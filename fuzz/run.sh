#!/usr/bin/env bash
# Fuzz campaigns without cargo-fuzz or nightly: builds the targets with libFuzzer's
# coverage instrumentation (SanitizerCoverage, no sanitizer) on the stable toolchain and
# runs each for SECONDS, starting from its committed seed corpus in fuzz/corpus/TARGET.
#
#   fuzz/run.sh 600              # every target, 10 minutes each (a campaign)
#   fuzz/run.sh 30 t3_config     # one target, 30 s
#   fuzz/run.sh runs:20000       # every target, 20,000 inputs from seed 1: deterministic
#                                # (the CI smoke: the same inputs on every machine, so a
#                                # campaign's new find cannot make CI flaky)
#
# New inputs go to fuzz/work/TARGET (not committed); crashes to fuzz/artifacts/TARGET/,
# reproduced with `fuzz/target/<host triple>/release/TARGET fuzz/artifacts/TARGET/crash-...`.
# One line per target is appended to fuzz/work/summary.tsv:
# target, seconds, total execs, execs/s, coverage (edges), features, crashes.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
# A time budget, or `runs:N` for a fixed number of inputs from a fixed seed.
if [[ "$secs" == runs:* ]]; then
  budget=(-runs="${secs#runs:}" -seed=1)
else
  budget=(-max_total_time="$secs")
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^nmcp-fuzz$')
fi
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
host=$(rustc -vV | sed -n "s/^host: //p")
# --target keeps the instrumentation off build scripts and proc macros.
cargo build --release --quiet --target "$host" "${bins[@]}"
mkdir -p work
status=0
for t in "${targets[@]}"; do
  mkdir -p "work/$t" "artifacts/$t" "corpus/$t"
  log="work/$t.log"
  set +e
  args=("${budget[@]}")
  # t3_config simulates a small multi-GPU system per input (~40 ms) and queue_dump replays
  # a whole dump per input (~10 ms): fewer inputs in the smoke.
  if [[ "$secs" == runs:* && "$t" == t3_config ]]; then args=(-runs=500 -seed=1); fi
  if [[ "$secs" == runs:* && "$t" == queue_dump ]]; then args=(-runs=2000 -seed=1); fi
  "target/$host/release/$t" "work/$t" "corpus/$t" "${args[@]}" -timeout=60 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="artifacts/$t/" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  crashes=$(find "artifacts/$t" -type f | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$secs" "${execs:-0}" "${rate:-0}" "${cov:-0}" "${ft:-0}" "$crashes" | tee -a work/summary.tsv
  if [ "$rc" -ne 0 ]; then
    echo "fuzz target $t failed (exit $rc); its log is fuzz/$log:" >&2
    tail -30 "$log" >&2
    status=1
  fi
done
exit $status
