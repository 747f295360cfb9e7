#!/bin/bash
# For a call after session 2026-12-07b, on the gpu-pending branch (pack as call5.sh says): the routed experts' float
# down kernel staging 2-byte aligned rows (Q6_K, Q2_K, Q3_K) through 16-byte pieces (DS4_CUDA_DOWN_STAGE=1) against
# its own small loads (issue 9: the Q6_K downs were 67 us a layer at eight sequences; issue 13: GLM-5's Q2_K/Q3_K
# experts). Tests with the switch on first (the MoE ops tests against the CPU and batch = alone bit for bit, the
# Qwen3 and GLM-5 model suites), then batched decode of the Qwen3 shape and one-sequence decode of the GLM-5 q2
# shape with it off and on, then ncu's sections of the downs at eight sequences, both ways.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
mkdir -p "$O/tests" "$O/decode" "$O/ncu"
for t in "cudabackend_ops_test --gtest_filter=*Moe*:*Expert*" cudabackend_model_test cudabackend_glm_dsa_model_test; do
  name=${t%% *}
  # shellcheck disable=SC2086  # the binary and its filter
  DS4_CUDA_DOWN_STAGE=1 DS4_CUDA_TEST_Q4KM=.gpurun/q4km.gguf DS4_BIN=$B timeout 150 $B/$t > "$O/tests/$name.txt" 2>&1
  echo "== $name (DS4_CUDA_DOWN_STAGE=1) rc=$? $(el) s"; grep -E "PASSED|FAILED" "$O/tests/$name.txt"
done
for s in 0 1; do
  DS4_CUDA_DOWN_STAGE=$s OUT=$O/decode/qwen3-stage$s timeout 120 bash bench/parallel-decode.sh .gpurun 1 8 > "$O/decode/qwen3-stage$s.txt" 2>&1
  echo "== qwen3 stage=$s $(el) s"; grep -E '^\| (1|8) \| 512 ' "$O/decode/qwen3-stage$s.txt"
done
G=/dev/shm/glm5q2.gguf
"$B/ds4-gguf" synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out $G > "$O/decode/glm-synth.txt" 2>&1
for s in 0 1 0 1; do
  DS4_CUDA_DOWN_STAGE=$s timeout 60 "$B/ds4-bench" -m $G --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 \
    --gen-tokens 128 --prefill-chunk 512 > "$O/decode/glm-stage$s.csv" 2> "$O/decode/glm-stage$s.log"
  echo "== glm5 q2 stage=$s: $(tail -1 "$O/decode/glm-stage$s.csv") $(el) s"
done
cp bench/cuda-ncu-step.sh bench/ncu_step_table.py .gpurun/ 2>/dev/null
for s in 0 1; do
  DS4_CUDA_DOWN_STAGE=$s DS4_NCU_MODES='' DS4_NCU_DETAIL_N=8 DS4_NCU_DETAIL_KERNELS='down_combine' DS4_NCU_DETAIL_COUNT=24 \
    OUT=$O/ncu/stage$s timeout 120 bash .gpurun/cuda-ncu-step.sh 8 > "$O/ncu/stage$s.txt" 2>&1
  echo "== ncu stage=$s rc=$? $(el) s"
done
# Issue 11's design (bench/NOTES.md 2026-12-07 second session): a kernel reading mapped host memory. Built here:
# /usr/local/cuda/bin/nvcc -O3 -arch=sm_90 -o .gpurun/host_read bench/host-read/host_read.cu
[ -x .gpurun/host_read ] && timeout 60 .gpurun/host_read 2048 | tee "$O/host-read.txt"
find "$O" -name '*.csv' -size +2M -delete
tar czf "$O/call6.tgz" -C "$O" tests decode ncu && rm -rf "${O:?}/tests" "${O:?}/decode" "${O:?}/ncu"
echo "all done $(el) s"
