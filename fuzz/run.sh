#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer + UBSan, every library instrumented) in
# build-fuzz/, assembles their seed corpora and runs them.
#   fuzz/run.sh [--seconds N] [--jobs J] [--timeout S] [TARGET...]   TARGET: onnx profile plan serve (default all)
# Each target runs N seconds (default 60), J targets at a time (default: the cores not busy with other
# work, by the load average; at least 1). S: the seconds
# one input may take before it counts as a hang (default 10; raise it when the fuzzers share the
# machine with other work, say `nice`d in the background, where a slice of CPU is not a hang). The corpus of
# each grows in build-fuzz/corpus/TARGET/ across runs. A crash, leak, undefined behaviour, hang (over
# S seconds on one input, and again when that input is replayed alone: a machine busy with other work
# makes a fast input slow) or an allocation over 2 GB fails the script and leaves the input in
# build-fuzz/crashes/TARGET/; copy it to tests/data/bad/ with its expected message when fixed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
# Targets at a time: the cores not already busy (a CI machine running another build), at least one.
jobs=$(awk -v n="$(nproc)" '{ free = n - int($1 + 0.5); print (free < 1 ? 1 : free) }' /proc/loadavg)
timeout=10
targets=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    onnx|profile|plan|serve) targets+=("$1"); shift ;;
    *) echo "fuzz/run.sh: unknown argument \"$1\"; usage: fuzz/run.sh [--seconds N] [--jobs J] [--timeout S] [onnx|profile|plan|serve]..." >&2; exit 2 ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=(onnx profile plan serve)
# GPUSIM_FUZZ_BUILD: an existing instrumented build to use (tools/test.sh's build-sanitize/).
build=${GPUSIM_FUZZ_BUILD:-$root/build-fuzz}
[[ $build = /* ]] || build=$root/$build
shared=${GPUSIM_ONNX_TESTDATA:-$root/../shared/onnx-testdata}

if [[ -z ${GPUSIM_FUZZ_BUILD:-} ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DGPUSIM_FUZZ=ON -DGPUSIM_SANITIZE=address,undefined \
    -DGPUSIM_BUILD_TESTS=OFF -DGPUSIM_BUILD_BENCH=OFF -DGPUSIM_BUILD_PYTHON=OFF >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target gpusim $(printf 'fuzz_%s ' "${targets[@]}")

# Seed corpora: real inputs of each edge, so mutations start from valid files.
seeds=$build/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{onnx,profile,plan,serve}
n=0
for f in "$root"/models/*.onnx "$root"/tests/data/models/*.onnx; do cp "$f" "$seeds/onnx/$(basename "$f")"; done
if [[ -d $shared ]]; then
  while IFS= read -r f; do n=$((n + 1)); cp "$f" "$seeds/onnx/testdata_$n.onnx"; done < <(find "$shared" -name '*.onnx' | sort)
fi
find "$root/gpu_profiles" -name '*.yaml' -exec cp {} "$seeds/profile/" \;
for s in eager greedy beam random split; do
  "$build/bin/gpusim" plan "$root/models/mobilenet_v2.onnx" --gpu nvidia-rtx-3060 --scheduler "$s" \
    --out "$seeds/plan/mobilenet_v2_$s.json" >/dev/null
done
# Depth and overflow variants of a real plan (every field deep, or an extreme number), and the
# regression corpus of every edge (tests/data/bad/EDGE/: the crashes and hostile inputs found so
# far), so each run starts at the shapes that broke gpusim before.
python3 "$root/fuzz/hostile_seeds.py" plan "$seeds/plan/mobilenet_v2_eager.json" "$seeds/plan" >/dev/null
for edge in onnx profile plan serve; do
  for f in "$root/tests/data/bad/$edge"/*; do
    [[ $f == *.expected ]] || cp "$f" "$seeds/$edge/bad_$(basename "$f")"
  done
done
# serve: one byte choosing the route (0-4: predict, compare, plan, validate, models) and JSON or
# raw ONNX (+5), then the body.
small=$root/models/mobilenet_v2.onnx
b64=$(base64 -w0 "$small")
body() { printf "\\x$(printf %02x "$1")"; printf '%s' "$2"; }
body 0 "{\"model_base64\": \"$b64\", \"gpu\": \"nvidia-t4\", \"dtype\": \"fp16\"}" > "$seeds/serve/predict.bin"
body 1 "{\"model_base64\": \"$b64\", \"gpus\": [\"nvidia-t4\", \"nvidia-l4\"]}" > "$seeds/serve/compare.bin"
body 2 "{\"model_base64\": \"$b64\", \"gpu\": \"nvidia-t4\", \"scheduler\": \"beam\", \"top\": 2}" > "$seeds/serve/plan.bin"
body 3 "{\"runs\": [], \"gpus\": [\"nvidia-t4\"]}" > "$seeds/serve/validate.bin"
body 0 "{\"model_base64\": \"$b64\", \"gpu\": \"nvidia-t4\", \"runtime\": \"pytorch-eager\", \"host\": \"windows,single_thread=2200\"}" > "$seeds/serve/predict_host.bin"
body 1 "{\"model_base64\": \"$b64\", \"gpus\": [\"nvidia-t4\"], \"runtime\": \"pytorch-eager\", \"host\": \"../runtimes/hosts/_model.yaml\"}" > "$seeds/serve/compare_host_path.bin"
{ printf '\x09'; cat "$small"; } > "$seeds/serve/upload.bin"
# Hostile fields: paths and traversals where names go, deep nesting, many values, unknown fields.
body 0 "{\"model_base64\": \"$b64\", \"gpu\": \"../../etc/passwd\", \"runtime\": \"/etc/shadow.yaml\"}" > "$seeds/serve/paths.bin"
body 1 "{\"model_base64\": \"$b64\", \"gpus\": [\"nvidia-t4\", \"/tmp/x.yaml\", \"..\"]}" > "$seeds/serve/compare_paths.bin"
body 3 "{\"runs\": [], \"runtime\": \"../runtimes/pytorch-eager\", \"gpus\": \"a/b,c.yaml\"}" > "$seeds/serve/validate_paths.bin"
body 2 "{\"dim\": $(printf '[%.0s' $(seq 300))$(printf ']%.0s' $(seq 300))}" > "$seeds/serve/deep.bin"
body 3 "{\"runs\": [$(printf '{},%.0s' $(seq 3000)){}]}" > "$seeds/serve/many.bin"
body 0 "{\"model_base64\": \"$b64\", \"gpu\": \"nvidia-t4\", \"dtpye\": \"fp16\"}" > "$seeds/serve/unknown_field.bin"
body 10 "{\"gpu\": \"nvidia-t4\"}" > "$seeds/serve/text_plain.bin"

status=0
# A finding's report, on stdout too (CI logs may keep only stdout).
report() {
  local t=$1 log=$2
  echo "fuzz $t: FAILED; the input is in $build/crashes/$t/; the report:" | tee /dev/stderr
  { grep -A30 -m1 -E "ERROR: |runtime error|deadly signal|out-of-memory|timeout" "$log" || tail -40 "$log"; } | tee /dev/stderr
}
run_one() {
  local t=$1
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  local log=$build/fuzz_$t.log
  rm -f "$log.slow"
  echo "fuzz $t: ${seconds}s (hang: ${timeout}s), corpus $(ls "$build/corpus/$t" | wc -l) + $(ls "$seeds/$t" | wc -l) seeds, log $log"
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
      "$build/fuzz/fuzz_$t" "$build/corpus/$t" "$seeds/$t" -max_total_time="$seconds" -timeout="$timeout" \
      -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len=4000000 -print_final_stats=1 \
      -artifact_prefix="$build/crashes/$t/" >"$log" 2>&1; then
    echo "fuzz $t: clean, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') inputs"
    return 0
  fi
  # A timeout on a busy machine is not a finding until the input is slow alone: it is replayed
  # once every target has stopped (replay_slow), and counts only if it times out (or fails) again.
  local slow
  slow=$(grep -o "Test unit written to .*timeout-[0-9a-f]*" "$log" | sed 's/Test unit written to //' | tail -1)
  if grep -q "ERROR: libFuzzer: timeout after" "$log" && [[ -n $slow && -f $slow ]]; then
    echo "$slow" > "$log.slow"
    echo "fuzz $t: one input passed the ${timeout}s hang limit; replayed alone when every target has stopped"
    return 0
  fi
  report "$t" "$log"
  return 1
}
replay_slow() {
  local t=$1 log=$build/fuzz_$t.log
  [[ -f $log.slow ]] || return 0
  local slow t0 t1
  slow=$(cat "$log.slow")
  t0=$(date +%s.%N)
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
      "$build/fuzz/fuzz_$t" -timeout="$timeout" -rss_limit_mb=4096 -malloc_limit_mb=2048 -runs=1 "$slow" \
      >"$log.replay" 2>&1; then
    t1=$(date +%s.%N)
    echo "fuzz $t: clean, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') inputs;" \
      "one input passed the ${timeout}s hang limit under load and replays alone in" \
      "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')s: not a finding ($slow)"
    return 0
  fi
  echo "fuzz $t: the input that timed out times out (or fails) alone too: $slow" | tee /dev/stderr
  report "$t" "$log.replay"
  return 1
}
pids=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  if [[ ${#pids[@]} -ge $jobs ]]; then wait "${pids[0]}" || status=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
for t in "${targets[@]}"; do replay_slow "$t" || status=1; done
exit $status
