#!/bin/bash
# One device call for a CUDA decode-speed step (issue 13): the CUDA tests, a DeepSeek V4 Flash q2 (8 blocks) op
# profile and decode bench, memcheck over the op tests, and (time left) the Qwen3-30B-A3B-shaped q4_k_m decode.
#
# Here: pack like bench/cuda-correctness.sh --pack (pk.tar.xz with the four CUDA test binaries, ds4-gguf and
# ds4-bench, plus q4km.gguf) into a folder the device call carries, e.g. .gpurun-cuda/.
# There: bash bench/cuda-decode-step.sh FOLDER [deadline_s]   (deadline: seconds after which optional parts are
# skipped; default 540). Output under $OUT: summary.txt and logs.tar.gz (every log, CSV and JSON).
set -u
src=$(cd "${1:?usage: bench/cuda-decode-step.sh FOLDER [deadline_s]}" && pwd)
deadline=${2:-540}
O=${OUT:-/tmp/out}; L=$(mktemp -d); mkdir -p "$O"
t0=$SECONDS
left() { echo $((deadline - (SECONDS - t0))); }
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"
export DS4_BIN=$B LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -f "$src/q4km.gguf" ] && export DS4_CUDA_TEST_Q4KM=$src/q4km.gguf
S=$L/summary.txt
{ nvidia-smi -L; nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv; date -u; cat "$B/commit"; } > "$S" 2>&1
cd "$B" || exit 1
# DeepSeek V4 file first (its synth runs on the CPU while nothing else needs it would be nicer, but the tests are
# short); /dev/shm keeps it off the small disk.
F=/dev/shm/dsv4-f8.gguf
( ./ds4-gguf synth --arch deepseek4 --preset flash --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out "$F" \
    > "$L/synth-dsv4.log" 2>&1; echo "synth rc=$?" >> "$L/synth-dsv4.log" ) &
synth=$!
for t in cudabackend_ops_test cudabackend_dsv4_ops_test cudabackend_model_test cudabackend_dsv4_model_test; do
  s=$SECONDS
  timeout 300 "./$t" > "$L/$t.txt" 2>&1; echo "$t rc=$? ($((SECONDS - s)) s)" >> "$L/$t.txt"
done
grep -hE "^\[  (PASSED|FAILED) |rc=|Failure|worst" "$L"/cudabackend_*.txt >> "$S"
# Extra gtest runs (DS4_STEP_TESTS="NAME|ENV|ARGS;..."): e.g. one seed on both MoE paths.
IFS=';' read -ra extra <<< "${DS4_STEP_TESTS:-}"
for spec in "${extra[@]}"; do
  IFS='|' read -r name envs args <<< "$spec"
  env $envs timeout 120 ./cudabackend_ops_test $args > "$L/extra-$name.txt" 2>&1; echo "extra $name rc=$?" >> "$L/extra-$name.txt"
  grep -hE "^\[  (PASSED|FAILED) |rc=|relative error" "$L/extra-$name.txt" | head -8 >> "$S"
done
wait $synth; tail -1 "$L/synth-dsv4.log" >> "$S"
DS4_CUDA_PROFILE=1 timeout 120 ./ds4-bench -m "$F" --ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 32 \
  --prefill-chunk 512 > "$L/profile.txt" 2>&1
grep -E "moe|matvec|rms_norm|ops timed|generation" "$L/profile.txt" | head -24 >> "$S"
# A/B in the same call: the fused MoE decode kernels on (default) and off (DS4_CUDA_MOE_FUSED=0).
for ab in on off; do
  v=1; [ $ab = off ] && v=0
  DS4_CUDA_MOE_FUSED=$v timeout 150 ./ds4-bench -m "$F" --ctx-start 512 --ctx-max 4096 --step-mul 8 --gen-tokens 64 \
    --prefill-chunk 512 --json "$L/dsv4-f8-$ab.json" > "$L/dsv4-f8-$ab.csv" 2> "$L/dsv4-f8-$ab.log"
  { echo "dsv4 f8 bench, fused $ab:"; cat "$L/dsv4-f8-$ab.csv"; grep -E "replayed|weights per" "$L/dsv4-f8-$ab.log"; } >> "$S"
done
rm -f "$F"
for t in cudabackend_ops_test cudabackend_dsv4_ops_test; do
  [ "$(left)" -gt 120 ] || { echo "memcheck $t skipped (deadline)" >> "$S"; continue; }
  timeout $(( $(left) - 60 )) compute-sanitizer --tool memcheck --error-exitcode 9 "./$t" --gtest_filter='-*RealShape*' \
    > "$L/memcheck-$t.txt" 2>&1
  echo "memcheck $t rc=$?" >> "$L/memcheck-$t.txt"; grep -hE "ERROR SUMMARY|rc=|^\[  (PASSED|FAILED) " "$L/memcheck-$t.txt" >> "$S"
done
if [ "$(left)" -gt 150 ]; then
  Q=/dev/shm/q30b-q4km.gguf
  timeout $(( $(left) - 90 )) ./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer \
    --seed 1 --out "$Q" > "$L/synth-qwen3.log" 2>&1 &&
  for ab in on off; do
    v=1; [ $ab = off ] && v=0
    [ "$(left)" -gt 40 ] || break
    DS4_CUDA_MOE_FUSED=$v timeout $(( $(left) - 5 )) ./ds4-bench -m "$Q" --backend cuda --ctx-start 512 --ctx-max 512 \
      --step-incr 1 --gen-tokens 128 --prefill-chunk 512 --json "$L/qwen3-q4km-$ab.json" > "$L/qwen3-q4km-$ab.csv" \
      2> "$L/qwen3-q4km-$ab.log"
    { echo "qwen3 q4_k_m bench, fused $ab:"; cat "$L/qwen3-q4km-$ab.csv"; grep -E "replayed|weights per" "$L/qwen3-q4km-$ab.log"; } >> "$S"
  done
  rm -f "$Q"
else
  echo "qwen3 bench skipped (deadline)" >> "$S"
fi
cp "$S" "$O/summary.txt"; tar czf "$O/logs.tar.gz" -C "$L" .
cat "$S"
