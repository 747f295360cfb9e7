#!/bin/bash
# Session 2026-12-07g, the smallest useful call (~200 s, for what the failed starts left): the new code's tests and
# one decode/prefill run each of the baseline, the L2 branch (level 2), and both prefill kernels. Pack as call1.sh.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=$O/r; mkdir -p "$R"; nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B DS4_BIN=$B
f=/dev/shm/q30b-q4km.gguf
( "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out $f > "$R/synth.txt" 2>&1 ) &
SY=$!
DS4_CUDA_FUSE_QKV=1 DS4_CUDA_SMALL_F32_GEMM=1 timeout 60 "$B/cudabackend_ops_test" --gtest_filter='*KvStore*:*QkNormRope*:*Matmul*:*Router*:*SmallF32*' > "$R/ops.txt" 2>&1
echo "== ops (FUSE_QKV=1 SMALL_F32_GEMM=1) rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/ops.txt" | head
DS4_CUDA_GEMM_FRAG=1 timeout 60 "$B/cudabackend_f16_prefill_test" > "$R/f16-frag.txt" 2>&1
echo "== f16 prefill suite GEMM_FRAG=1 rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/f16-frag.txt" | head
wait $SY; echo "== synth $(el) s"
D="--ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 64 --prefill-chunk 512"
dec() { local name=$1; shift; env DS4_CUDA_STEP_TIMING=1 "$@" timeout 45 "$B/ds4-bench" -m $f --backend cuda $D > /dev/null 2> "$R/d-$name.txt"
  echo "== $name rc=$? $(el) s $(grep -E 'ctx ' "$R/d-$name.txt" | head -1 | sed 's/.*prefill/pp/' | cut -c1-60) | $(sed -n 's/.*device time per replay median \([0-9.]*\) ms.*/\1 ms/p' "$R/d-$name.txt" | tail -1)"; }
dec base DS4_CUDA_L2_AHEAD=0
dec ahead2 DS4_CUDA_L2_AHEAD=2
dec frag-f32 DS4_CUDA_GEMM_FRAG=1 DS4_CUDA_SMALL_F32_GEMM=1
dec base2 DS4_CUDA_L2_AHEAD=0
tar czf "$O/callMin.tgz" -C "$O" r && rm -rf "$R"
echo "all done $(el) s"
