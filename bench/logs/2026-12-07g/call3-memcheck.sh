#!/bin/bash
# Session 2026-12-07g, call 3: compute-sanitizer memcheck over the CUDA code that had not run under it (l2_ahead's
# side branch and kernels, matmuls_split, cache_row.cuh, the router fold's allocation): the ops tests that reach
# them with DS4_CUDA_L2_AHEAD=2 DS4_CUDA_FUSE_QKV=1, and the Qwen3 model suite's f32 / q8_0 cases (recorded steps).
# Also vmm_probe's remap parts (issue 11). Pack as call1.sh; carry [".gpurun"].
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=$O/m; mkdir -p "$R"; nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B DS4_BIN=$B
export DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf DS4_CUDA_L2_AHEAD=2 DS4_CUDA_FUSE_QKV=1 DS4_CUDA_SMALL_F32_GEMM=1
mc() { local name=$1; shift; timeout 250 compute-sanitizer --tool memcheck --error-exitcode 9 "$@" > "$R/$name.txt" 2>&1
  echo "== $name rc=$? $(el) s: $(grep -hE 'ERROR SUMMARY' "$R/$name.txt" | tail -1) $(grep -cE '^\[       OK' "$R/$name.txt") ok"; }
mc ops "$B/cudabackend_ops_test" --gtest_filter='*KvStore*:*QkNormRope*:*Matmul*:*Router*:*Moe*:*SmallF32*'
mc model "$B/cudabackend_model_test" --gtest_filter='-*RealShape*:*q4_k_m*'
timeout 40 .gpurun/vmm_probe 256 2.92 > "$R/vmm-probe.txt" 2>&1; echo "== vmm_probe rc=$? $(el) s"
grep -E "remap|set access" "$R/vmm-probe.txt"
tar czf "$O/call3.tgz" -C "$O" m && rm -rf "$R"
echo "all done $(el) s"
