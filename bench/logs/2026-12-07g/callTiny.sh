#!/bin/bash
# Session 2026-12-07g: correctness only, for the last ~100 s of device time: the f16 prefill suite (gemm_frag called
# directly, and the suite with DS4_CUDA_GEMM_FRAG=1), the ops tests of small_f32_gemm, matmuls_split, cache_row.cuh
# and the router fold. Pack as call1.sh.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B DS4_BIN=$B; nvidia-smi -L
DS4_CUDA_GEMM_FRAG=1 timeout 40 "$B/cudabackend_f16_prefill_test" > "$O/f16-frag.txt" 2>&1
echo "== f16 prefill suite GEMM_FRAG=1 rc=$? $(el) s"; grep -E "OK|PASSED|FAILED|Failure" "$O/f16-frag.txt" | head -30
DS4_CUDA_FUSE_QKV=1 DS4_CUDA_SMALL_F32_GEMM=1 timeout 40 "$B/cudabackend_ops_test" --gtest_filter='*KvStore*:*QkNormRope*:*Matmul*:*Router*:*SmallF32*' > "$O/ops.txt" 2>&1
echo "== ops FUSE_QKV=1 SMALL_F32_GEMM=1 rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$O/ops.txt" | head
