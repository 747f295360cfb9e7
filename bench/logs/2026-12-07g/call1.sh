#!/bin/bash
# Session 2026-12-07g call 1 (next-call1.sh of 2026-12-07f plus the small F32 prefill product test).
# Pack: `bash bench/cuda-correctness.sh --pack build-cuda` (glm-routed.gguf moved aside); carry [".gpurun"].
# 1) cache_row.cuh (shared by kv_store and the fused store; not yet run on a GPU): the ops tests of both and the
#    Qwen3 suite, the latter also with DS4_CUDA_L2_AHEAD=2 and DS4_CUDA_FUSE_QKV=1 (a side branch in every
#    recorded step; q/k/v in one launch); the router's fold after router_topk_supported moved before it;
# 2) issue 13: the L2 prefetch branch (Backend::prefetch, cuda/l2_ahead.h: o + router during attention, the next
#    block's q/k/v during the experts, the chosen experts' down during gate/up) on / off, interleaved, Qwen3-30B-A3B
#    q4_k_m decode at depth 512, replay device time and t/s (level 2: the chosen experts' gate/up too);
#    q/k/v in one launch (matmuls_split, DS4_CUDA_FUSE_QKV=1) in the same rounds;
# 3) the decode knobs of next-call.sh (FUSE_MERGE=0, DENSE_SPLIT=0, MATVEC_NR=1/2, DOWN_STAGE=1), one run each.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=$O/r; mkdir -p "$R"; nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B DS4_BIN=$B
export DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf
f=/dev/shm/q30b-q4km.gguf
( [ -f $f ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out $f > "$R/synth.txt" 2>&1 ) &
SY=$!
timeout 100 "$B/cudabackend_ops_test" --gtest_filter='*KvStore*:*QkNormRope*:*Matmul*:*Router*:*SmallF32*' > "$R/ops.txt" 2>&1
echo "== ops rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/ops.txt" | head
DS4_CUDA_SMALL_F32_GEMM=1 timeout 60 "$B/cudabackend_ops_test" --gtest_filter='*SmallF32*:*TypedOps*Matmul*' > "$R/ops-f32.txt" 2>&1
echo "== ops SMALL_F32_GEMM=1 rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/ops-f32.txt" | head
DS4_CUDA_FUSE_QKV=1 timeout 100 "$B/cudabackend_ops_test" --gtest_filter='*Matmul*' > "$R/ops-qkv.txt" 2>&1
echo "== ops FUSE_QKV=1 rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/ops-qkv.txt" | head
wait $SY; echo "== synth $(el) s"
D="--ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512"
dec() { local name=$1; shift; env DS4_CUDA_STEP_TIMING=1 "$@" timeout 60 "$B/ds4-bench" -m $f --backend cuda $D > /dev/null 2> "$R/d-$name.txt"
  echo "== $name rc=$? $(el) s $(grep -E 'ctx ' "$R/d-$name.txt" | head -1 | sed 's/.*generation/gen/' | cut -c1-30) | $(sed -n 's/.*device time per replay median \([0-9.]*\) ms.*/\1 ms/p' "$R/d-$name.txt" | tail -1)"; }
for i in 1 2 3; do
  dec ahead0-$i DS4_CUDA_L2_AHEAD=0
  dec ahead1-$i DS4_CUDA_L2_AHEAD=1
  dec ahead2-$i DS4_CUDA_L2_AHEAD=2
  dec qkv1-$i DS4_CUDA_FUSE_QKV=1
done
for knob in DS4_CUDA_FUSE_MERGE=0 DS4_CUDA_DENSE_SPLIT=0 DS4_CUDA_MATVEC_NR=1 DS4_CUDA_MATVEC_NR=2 DS4_CUDA_DOWN_STAGE=1; do
  dec "knob-${knob#DS4_CUDA_}" $knob
done
dec ahead0-4 DS4_CUDA_L2_AHEAD=0
for v in 0 2; do
  env DS4_CUDA_L2_AHEAD=$v timeout 60 "$B/ds4-bench" -m $f --backend cuda $D --parallel 8 > /dev/null 2> "$R/p8-ahead$v.txt"
  echo "== N=8 ahead=$v rc=$? $(el) s $(grep -E 'ctx ' "$R/p8-ahead$v.txt" | head -1 | sed 's/.*generation/gen/' | cut -c1-30)"
done
timeout 150 "$B/cudabackend_model_test" > "$R/model.txt" 2>&1
echo "== model suite rc=$? $(el) s"; grep -E "PASSED|FAILED" "$R/model.txt" | head
DS4_CUDA_L2_AHEAD=2 DS4_CUDA_FUSE_QKV=1 DS4_CUDA_SMALL_F32_GEMM=1 timeout 150 "$B/cudabackend_model_test" > "$R/model-ahead.txt" 2>&1
echo "== model suite L2_AHEAD=2 FUSE_QKV=1 SMALL_F32_GEMM=1 rc=$? $(el) s"; grep -E "PASSED|FAILED" "$R/model-ahead.txt" | head
tar czf "$O/next-call1.tgz" -C "$O" r && rm -rf "$R"
echo "all done $(el) s"
