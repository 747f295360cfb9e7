#!/bin/bash
# One device call for the device-side candidates (top_k_rows, issue 9): the four CUDA test binaries (real-shape
# cases left out; the new TopKRowsEqualsCpu among them), then ds4-bench decode on the Qwen3-30B-A3B-shaped q4_k_m
# file at ctx 512 for N = 1, 8, 16, 32 sequences, each with the argmax taken on the device (the default now) and
# with --host-argmax (every logits row copied to the host and scanned there, as before), interleaved so drift
# hits both; N = 1 also at ctx 4096, and int8 activations at N = 1 and 8. Optional: DS4_MEMCHECK=1 adds
# compute-sanitizer memcheck of the four binaries; DS4_EXTRA="cmd" runs one more command at the end.
#
# Here: bash bench/cuda-correctness.sh --pack build; cp bench/*.sh .gpurun/
# There (carry [".gpurun"]): bash .gpurun/cuda-argmax-ab.sh   (output under $OUT, summary on stdout)
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf DS4_BIN=$B
f=/dev/shm/q30b-q4km.gguf
( [ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
    --out "$f" > "$O/synth.log" 2>&1 ) &
( cd "$B" && for t in cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test; do
  timeout 240 ./$t --gtest_filter='-*RealShape*' > "$O/$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "^\[  (PASSED|FAILED) |Failure|TopK" "$O/$t.txt" | head -8
done )
wait
run() {  # label, ds4-bench args
  local label=$1; shift
  timeout 120 "$B/ds4-bench" -m "$f" --backend cuda --gen-tokens 128 --prefill-chunk 512 "$@" > "$O/$label.csv" \
    2> "$O/$label.log"; echo "$label: $(grep -v '^ctx' "$O/$label.csv" | tr '\n' ' ')"
}
w=(--ctx-start 512 --ctx-max 512 --step-incr 1)
for n in 1 8 16 32; do
  p=(); [ $n -gt 1 ] && p=(--parallel $n)
  run d$n "${w[@]}" "${p[@]}"; run h$n "${w[@]}" "${p[@]}" --host-argmax
done
run d1-4096 --ctx-start 4096 --ctx-max 4096 --step-incr 1
run h1-4096 --ctx-start 4096 --ctx-max 4096 --step-incr 1 --host-argmax
run i1 "${w[@]}" --int8-activations; run i8 "${w[@]}" --int8-activations --parallel 8
if [ "${DS4_MEMCHECK:-0}" = 1 ]; then
  cd "$B"
  for t in cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test; do
    ( timeout ${DS4_MEMCHECK_TIMEOUT:-300} compute-sanitizer --tool memcheck --error-exitcode 9 "./$t" \
        --gtest_filter='-*RealShape*' > "$O/memcheck-$t.txt" 2>&1; echo "memcheck $t rc=$?" >> "$O/memcheck-$t.txt" ) &
  done
  wait; cd - > /dev/null
  grep -hE "ERROR SUMMARY|rc=" "$O"/memcheck-*.txt
fi
[ -n "${DS4_EXTRA:-}" ] && bash -c "$DS4_EXTRA"
exit 0
