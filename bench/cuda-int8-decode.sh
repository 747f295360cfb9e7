#!/bin/bash
# One device call for the int8-activation decode path (issue 13): its device tests (the exact rule per product,
# the whole model on real shapes), then the Qwen3-30B-A3B-shaped q4_k_m decode with int8 activations (the
# --int8-activations) and without (float activations, the default), side by side, and an op-by-op profile of each.
#
# Here: bash bench/cuda-correctness.sh --pack build   (.gpurun/pk.tar.xz and q4km.gguf)
# There (carry [".gpurun"]): bash bench/cuda-int8-decode.sh .gpurun [deadline_s]
# Output under $OUT: summary.txt and every log.
set -u
src=$(cd "${1:?usage: bench/cuda-int8-decode.sh FOLDER [deadline_s]}" && pwd)
deadline=${2:-540}
O=${OUT:-/tmp/out}; mkdir -p "$O"
t0=$SECONDS
left() { echo $((deadline - (SECONDS - t0))); }
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"
export DS4_BIN=$B LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -f "$src/q4km.gguf" ] && export DS4_CUDA_TEST_Q4KM=$src/q4km.gguf
S=$O/summary.txt
{ nvidia-smi -L; nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; date -u; cat "$B/commit"; } > "$S" 2>&1
cd "$B" || exit 1
Q=/dev/shm/q30b-q4km.gguf
( ./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out "$Q" \
    > "$O/synth-qwen3.log" 2>&1; echo "synth rc=$?" >> "$O/synth-qwen3.log" ) &
synth=$!
timeout 200 ./cudabackend_ops_test --gtest_filter="${DS4_OPS_FILTER:-CudaInt8Ops.*:AllTypes/CudaTypedOps.Matmul*:CudaOps.MoeSwiglu*}" \
  > "$O/ops.txt" 2>&1; echo "ops rc=$?" >> "$O/ops.txt"
timeout 200 ./cudabackend_model_test --gtest_filter="${DS4_MODEL_FILTER:-*Int8*:*RealShape*}" > "$O/model.txt" 2>&1
echo "model rc=$?" >> "$O/model.txt"
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|worst|relative error|near-tie|int8" "$O/ops.txt" "$O/model.txt" | head -40 >> "$S"
wait $synth; tail -1 "$O/synth-qwen3.log" >> "$S"
# Modes: int8 / exact activations; "-nopdl" runs the same without programmatic dependent launch (DS4_CUDA_PDL=0).
for mode in ${DS4_BENCH_MODES:-int8 exact}; do
  flag=--int8-activations; [ "${mode%-nopdl}" = exact ] && flag=
  pdl=1; [ "${mode%-nopdl}" != "$mode" ] && pdl=0
  [ "$(left)" -gt 60 ] || { echo "bench $mode skipped (deadline)" >> "$S"; continue; }
  DS4_CUDA_PDL=$pdl timeout $(( $(left) - 30 )) ./ds4-bench -m "$Q" --backend cuda $flag --ctx-start 512 --ctx-max 4096 \
    --step-mul 8 --gen-tokens 128 --prefill-chunk 512 --json "$O/qwen3-$mode.json" > "$O/qwen3-$mode.csv" 2> "$O/qwen3-$mode.log"
  { echo "qwen3 q4_k_m, $mode:"; cat "$O/qwen3-$mode.csv"; grep -E "backend:|replayed|weights per" "$O/qwen3-$mode.log"; } >> "$S"
done
for mode in ${DS4_PROFILE_MODES:-int8 exact}; do
  flag=--int8-activations; [ $mode = exact ] && flag=
  [ "$(left)" -gt 40 ] || { echo "profile $mode skipped (deadline)" >> "$S"; continue; }
  DS4_CUDA_PROFILE=1 timeout $(( $(left) - 10 )) ./ds4-bench -m "$Q" --backend cuda $flag --ctx-start 512 --ctx-max 512 \
    --step-incr 1 --gen-tokens 32 --prefill-chunk 512 > "$O/profile-$mode.txt" 2>&1
  { echo "profile $mode:"; grep -E "moe|matvec|rms_norm|attention|rope|kv_store|add|route|ops timed|generation" \
      "$O/profile-$mode.txt" | head -24; } >> "$S"
done
rm -f "$Q"
cat "$S"
