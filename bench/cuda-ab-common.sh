# Sourced by the one-call CUDA A/B scripts (cuda-split-final.sh, cuda-wide-ab.sh) on the GPU machine, after
# `src` is the folder holding split.tar.xz and q4km.gguf (bash bench/cuda-split-ab.sh --pack build):
#   ab_setup            unpacks the binaries into $B, exports what the tests need, starts $O/summary.txt and the
#                       synth of the Qwen3-30B-A3B-shaped q4_k_m file $f in the background; $W holds the logs
#   ab_tests WHAT ENV FILTER  the op and model test binaries and memcheck of the op tests matching FILTER, in
#                       parallel, under ENV (space-separated assignments, "" for none; WHAT labels their rc
#                       lines, "" for none); waits for them and the synth, and appends the summary
#   ab_run LABEL ENV ARGS...  one ds4-bench decode run (ENV: space-separated assignments) into the summary
ab_setup() {
  T0=$(date +%s); O=${OUT:-/tmp/out}; mkdir -p "$O"; W=$(mktemp -d)
  B=$(mktemp -d); xz -dc "$src/split.tar.xz" | tar xf - -C "$B"
  export LD_LIBRARY_PATH=$B DS4_CUDA_TEST_Q4KM=$src/q4km.gguf DS4_BIN=$B
  { nvidia-smi -L; cat "$B/commit"; } > "$O/summary.txt" 2>&1
  f=/dev/shm/q30b-q4km.gguf
  ( [ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
      --out "$f" > "$W/synth.log" 2>&1 ) &
}
ab_tests() {
  local what=${1:+ ($1)} vars=$2 filter=$3
  ( cd "$B"
    [ -z "$vars" ] || export $vars
    ( timeout 300 ./cudabackend_ops_test > "$W/ops.txt" 2>&1; echo "cudabackend_ops_test$what rc=$?" >> "$W/ops.txt" ) &
    ( timeout 300 ./cudabackend_model_test > "$W/model.txt" 2>&1; echo "cudabackend_model_test$what rc=$?" >> "$W/model.txt" ) &
    ( timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 ./cudabackend_ops_test --gtest_filter="$filter" \
        > "$W/memcheck-ops.txt" 2>&1; echo "memcheck ops $filter$what rc=$?" >> "$W/memcheck-ops.txt" ) &
    wait )
  wait
  { echo "== tests ($(( $(date +%s) - T0 )) s)"
    grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|ERROR SUMMARY|qwen3-30b-a3b" "$W"/ops.txt "$W"/model.txt "$W"/memcheck-*.txt | head -40
  } >> "$O/summary.txt"
}
ab_run() {
  local label=$1 v=$2; shift 2
  env $v timeout 120 "$B/ds4-bench" -m "$f" --backend cuda --gen-tokens 128 --prefill-chunk 512 "$@" > "$W/$label.csv" \
    2> "$W/$label.log"; echo "$label: $(grep -v '^ctx' "$W/$label.csv" | tr '\n' ' ')" >> "$O/summary.txt"
}
