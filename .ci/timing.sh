#!/usr/bin/env bash
# Sourced by .ci/run: `step KEY BUDGET TITLE` starts a step; at exit (pass or fail) a table
# prints one row per step with its wall seconds, the CPU seconds of its processes and its
# budget (docs/CI.md), then the total.
# --- step timing: one row per step (wall seconds, CPU seconds of its processes, budget) ---
ci_t0=$SECONDS
step_name=""
step_budget=0
step_t0=0
step_cpu0=0
rows=()
# CPU seconds (user + system) of every child this shell has waited for, into `cpu`.
# `times` runs in this shell (a command substitution would report the subshell's own).
ci_times_file=$(mktemp)
read_cpu() {
  times >"$ci_times_file"
  cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$ci_times_file")
}
end_step() {
  [ -n "$step_name" ] || return 0
  local wall=$((SECONDS - step_t0))
  read_cpu
  cpu=$((cpu - step_cpu0))
  local flag=""
  if [ "$step_budget" -gt 0 ] && [ "$wall" -gt "$step_budget" ]; then flag="OVER BUDGET"; fi
  rows+=("$(printf '%-10s %7d %7d %7d  %s' "$step_name" "$wall" "$cpu" "$step_budget" "$flag")")
  step_name=""
}
# step KEY BUDGET_SECONDS TITLE...
step() {
  end_step
  step_name=$1 step_budget=$2
  shift 2
  read_cpu
  step_t0=$SECONDS step_cpu0=$cpu
  echo
  echo "=== $step_name: $* ==="
}
print_table() {
  local rc=$?
  end_step
  echo
  echo "=== CI step times (wall and CPU seconds; budgets in docs/CI.md) ==="
  printf '%-10s %7s %7s %7s\n' step wall cpu budget
  printf '%s\n' "${rows[@]}"
  printf '%-10s %7d\n' total $((SECONDS - ci_t0))
  exit $rc
}
trap print_table EXIT
