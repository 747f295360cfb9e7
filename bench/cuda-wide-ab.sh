#!/bin/bash
# Device call for the wide Q4_K decode matvec (quant_matmul.cu matvec_q4k_wide_kernel, DS4_CUDA_MATVEC_WIDE=1,
# issue 9/13): the op and model test binaries with the knob on (the Matmul cases hold a batch equal to each row
# alone and every row to the CPU), memcheck of the Matmul op tests with it, then ds4-bench decode of the
# Qwen3-30B-A3B-shaped q4_k_m file at ctx 512 for N = 1, 8, 32 sequences, on and off interleaved.
#
# Here: bash bench/cuda-split-ab.sh --pack build     (.gpu/split.tar.xz, .gpu/q4km.gguf)
# There (carry [".gpu"]): bash bench/cuda-wide-ab.sh .gpu   (output under $OUT, summary on stdout)
set -u
src=$(cd "${1:?usage: bench/cuda-wide-ab.sh FOLDER}" && pwd)
T0=$(date +%s); O=${OUT:-/tmp/out}; mkdir -p "$O"; W=$(mktemp -d)
B=$(mktemp -d); xz -dc "$src/split.tar.xz" | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B DS4_CUDA_TEST_Q4KM=$src/q4km.gguf DS4_BIN=$B
{ nvidia-smi -L; cat "$B/commit"; } > "$O/summary.txt" 2>&1
f=/dev/shm/q30b-q4km.gguf
( [ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
    --out "$f" > "$W/synth.log" 2>&1 ) &
( cd "$B"
  export DS4_CUDA_MATVEC_WIDE=1
  ( timeout 300 ./cudabackend_ops_test > "$W/ops.txt" 2>&1; echo "cudabackend_ops_test (wide) rc=$?" >> "$W/ops.txt" ) &
  ( timeout 300 ./cudabackend_model_test > "$W/model.txt" 2>&1; echo "cudabackend_model_test (wide) rc=$?" >> "$W/model.txt" ) &
  ( timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 ./cudabackend_ops_test --gtest_filter='*Matmul*' \
      > "$W/memcheck-ops.txt" 2>&1; echo "memcheck ops *Matmul* (wide) rc=$?" >> "$W/memcheck-ops.txt" ) &
  wait )
wait
{ echo "== tests ($(( $(date +%s) - T0 )) s)"
  grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|ERROR SUMMARY|qwen3-30b-a3b" "$W"/ops.txt "$W"/model.txt "$W"/memcheck-*.txt | head -40
  echo "== ds4-bench decode ($(( $(date +%s) - T0 )) s): w wide matvec, d defaults"; } >> "$O/summary.txt"
run() {  # label, env assignments, ds4-bench args
  local label=$1 v=$2; shift 2
  env $v timeout 120 "$B/ds4-bench" -m "$f" --backend cuda --gen-tokens 128 --prefill-chunk 512 "$@" > "$W/$label.csv" \
    2> "$W/$label.log"; echo "$label: $(grep -v '^ctx' "$W/$label.csv" | tr '\n' ' ')" >> "$O/summary.txt"
}
w=(--ctx-start 512 --ctx-max 512 --step-incr 1)
for n in 1 8 32; do
  p=(); [ $n -gt 1 ] && p=(--parallel $n)
  run w$n "DS4_CUDA_MATVEC_WIDE=1" "${w[@]}" "${p[@]}"; run d$n "DS4_NONE=1" "${w[@]}" "${p[@]}"
  run w$n-b "DS4_CUDA_MATVEC_WIDE=1" "${w[@]}" "${p[@]}"; run d$n-b "DS4_NONE=1" "${w[@]}" "${p[@]}"
done
echo "== done ($(( $(date +%s) - T0 )) s)" >> "$O/summary.txt"
tar cJf "$O/logs.tar.xz" -C "$W" . ; cat "$O/summary.txt"
