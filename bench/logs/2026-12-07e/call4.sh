#!/bin/bash
# Session 2026-12-07e, fourth call: the fused build of call3 (same .gpurun, glm-routed.gguf back in): every CUDA
# test binary but the Qwen3 model suite (call3 ran it), then compute-sanitizer memcheck over the ops tests of the
# fused kernels (qk_norm_rope_store, router_softmax_topk, attention with its merge folded in) and the Qwen3 model
# suite's synthetic cases. Carry [".gpurun"].
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p "$O/t"
OUT=$O/t DS4_CUDA_GROUPED_AB=0 DS4_CUDA_MMA_AB=0 DS4_TEST_TIMEOUT=200 \
  DS4_CUDA_TESTS="cudabackend_ops_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test cudabackend_glm_dsa_ops_test cudabackend_glm_dsa_model_test cudabackend_f16_prefill_test" \
  timeout 330 bash bench/cuda-correctness.sh .gpurun tests > "$O/t/stdout.txt" 2>&1
echo "== tests rc=$? $(el) s"; grep -h -E "rc=|PASSED|FAILED" "$O"/t/cudabackend_*.txt
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B DS4_BIN=$B
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 120 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$B/cudabackend_ops_test" \
  --gtest_filter='*QkNormRope*:*Router*:*Routing*:*KvStore*' > "$O/t/memcheck-ops.txt" 2>&1
echo "== memcheck ops rc=$? $(el) s"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$O/t/memcheck-ops.txt"
timeout 150 "$CS" --tool memcheck --leak-check no --error-exitcode 9 "$B/cudabackend_model_test" \
  --gtest_filter='*LogitsAndGreedyTokensMatchCpu*' > "$O/t/memcheck-model.txt" 2>&1
echo "== memcheck model rc=$? $(el) s"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$O/t/memcheck-model.txt"
tar czf "$O/call4.tgz" -C "$O" t && rm -rf "$O/t"
echo "all done $(el) s"
