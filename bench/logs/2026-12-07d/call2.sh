#!/bin/bash
# Session 2026-12-07d, second device call, on the warm machine right after call1.sh (whose .gpurun stays there: the
# Q4_K_M and GLM files): branch gpu-pending (bench/logs/2026-12-07b/gpu-pending's four patches on main), packed
# with `bash bench/cuda-correctness.sh --pack build-cuda` and moved to .gpurun2/pk.tar.xz. Carry [".gpurun2"].
# The staged step inputs/outputs (one page-locked block copied in by the recorded step) under every model suite
# that replays recorded steps, and the routed experts' float down kernel staging 2-byte-aligned rows
# (DS4_CUDA_DOWN_STAGE=1): the MoE ops tests and the Qwen3 / GLM-5 suites with it on, then Qwen3-shape decode at
# 1 and 8 sequences both ways (the same file as call1's benchmark).
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun2/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
mkdir -p "$O/tests" "$O/decode"
export DS4_BIN=$B DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf DS4_CUDA_TEST_GLM=$PWD/.gpurun/glm-routed.gguf
timeout 100 "$B/cudabackend_dsv4_model_test" > "$O/tests/dsv4.txt" 2>&1
echo "== dsv4 model suite (staged io) rc=$? $(el) s"; grep -E "PASSED|FAILED" "$O/tests/dsv4.txt"
for t in "cudabackend_ops_test --gtest_filter=*Moe*:*Expert*" cudabackend_model_test cudabackend_glm_dsa_model_test; do
  name=${t%% *}
  # shellcheck disable=SC2086  # the binary and its filter
  DS4_CUDA_DOWN_STAGE=1 timeout 110 $B/$t > "$O/tests/$name.txt" 2>&1
  echo "== $name (DS4_CUDA_DOWN_STAGE=1, staged io) rc=$? $(el) s"; grep -E "PASSED|FAILED" "$O/tests/$name.txt"
done
mkdir -p .gpurun2/x && cp .gpurun2/pk.tar.xz .gpurun2/x/
for s in 0 1; do
  DS4_CUDA_DOWN_STAGE=$s OUT=$O/decode/qwen3-stage$s timeout 90 bash bench/parallel-decode.sh .gpurun2/x 1 8 \
    > "$O/decode/qwen3-stage$s.txt" 2>&1
  echo "== qwen3 stage=$s $(el) s"; grep -E '^\| (1|8) \| ' "$O/decode/qwen3-stage$s.txt"
done
find "$O" -name '*.csv' -size +2M -delete
tar czf "$O/call2.tgz" -C "$O" tests decode && rm -rf "${O:?}/tests" "${O:?}/decode"
echo "all done $(el) s"
