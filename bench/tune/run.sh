#!/usr/bin/env bash
# Autotuning benchmark (issue 17): for each model, a cold tune (fresh store), a warm tune (same
# store), and the eager plan, the untuned plan and the tuned plan end to end (gpusim run, median
# per kernel of 3 runs, summed), each REPEATS times; prints the medians as a Markdown table row.
# With PLAN=PROFILE the tuned plan is `gpusim plan --gpu PROFILE`'s (fused groups, so each is also
# timed unfused); without, the eager plan (untuned = eager).
#
#   [PLAN=lavapipe-epyc-2c] bench/tune/run.sh build/bin/gpusim [BACKEND] [TOP_K] [REPEATS] MODEL [MODEL ...]
#
# Figures go to bench/RESULTS.md with the machine noted. Needs python3 (for the JSON).
set -euo pipefail
gpusim=${1:?gpusim binary}; backend=${2:-vulkan}; k=${3:-4}; reps=${4:-3}; shift 4
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export GPUSIM_KERNEL_CACHE_DIR="$work/kernels"
med() { python3 -c 'import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }
echo "| model, plan | kernels measured / cached / split | candidates | cold tune s (compile / measure) | warm start ms | top-1 within 3 % | top-1 / top-3 | median regret | mean tau | kernels alone: sim pick / tuned ms | end to end: eager / untuned / tuned ms |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for m in "$@"; do
  cold=(); comp=(); meas=(); warm=(); eager=(); untuned=(); tuned=()
  planarg=(); label=eager
  if [[ -n "${PLAN:-}" ]]; then
    "$gpusim" plan "$m" --gpu "$PLAN" --out "$work/p0.json" > /dev/null
    planarg=(--plan "$work/p0.json"); label="plan --gpu $PLAN"
  fi
  for r in $(seq "$reps"); do
    rm -f "$work"/t.db*
    "$gpusim" tune "$m" "${planarg[@]}" --backend "$backend" --top-k "$k" --store "$work/t.db" --repeat 0 --quiet --json --out "$work/p.json" > "$work/cold.json"
    cold+=("$(field "$work/cold.json" 'd["total_s"]')"); comp+=("$(field "$work/cold.json" 'd["compile_s"]')")
    meas+=("$(field "$work/cold.json" 'd["measure_s"]')")
    s=$(date +%s.%N); "$gpusim" tune "$m" "${planarg[@]}" --backend "$backend" --top-k "$k" --store "$work/t.db" --repeat 0 --quiet --json > "$work/warm.json"
    warm+=("$(python3 -c "import time; print((time.time() - $s) * 1e3)")")
    "$gpusim" run "$m" --backend "$backend" --repeat 3 --quiet --json > "$work/eager.json"
    "$gpusim" run "$m" --backend "$backend" --plan "$work/p.json" --repeat 3 --quiet --json > "$work/tuned.json"
    eager+=("$(field "$work/eager.json" 'd["total_us"] / 1e3')"); tuned+=("$(field "$work/tuned.json" 'd["total_us"] / 1e3')")
    if [[ -n "${PLAN:-}" ]]; then
      "$gpusim" run "$m" --backend "$backend" "${planarg[@]}" --repeat 3 --quiet --json > "$work/untuned.json"
      untuned+=("$(field "$work/untuned.json" 'd["total_us"] / 1e3')")
    else
      untuned+=("${eager[-1]}")
    fi
  done
  c=$work/cold.json
  printf '| %s, %s | %s / %s / %s | %s | %.1f (%.1f / %.1f) | %.0f | %.0f %% | %.0f %% / %.0f %% | %.1f %% | %.2f | %.1f / %.1f | %.1f / %.1f / %.1f |\n' \
    "$(basename "$m")" "$label" "$(field $c 'd["kernels_measured"]')" "$(field $c 'd["kernels_cached"]')" "$(field $c 'd["kernels_split"]')" "$(field $c 'd["candidates_run"]')" \
    "$(med "${cold[@]}")" "$(med "${comp[@]}")" "$(med "${meas[@]}")" "$(med "${warm[@]}")" \
    "$(field $c 'd["report_card"]["top1_within_3pct"] * 100')" "$(field $c 'd["report_card"]["top1_share"] * 100')" \
    "$(field $c 'd["report_card"]["top3_share"] * 100')" "$(field $c 'd["report_card"]["median_regret"] * 100')" \
    "$(field $c 'd["report_card"]["mean_kendall_tau"]')" "$(field $c 'd["simulator_pick_us"] / 1e3')" "$(field $c 'd["tuned_us"] / 1e3')" \
    "$(med "${eager[@]}")" "$(med "${untuned[@]}")" "$(med "${tuned[@]}")"
done
