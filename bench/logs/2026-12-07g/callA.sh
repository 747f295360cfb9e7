#!/bin/bash
# Session 2026-12-07g, the compact call (the device budget left after failed starts; ~350 s): tests of the code not
# yet run on a GPU (cache_row.cuh, matmuls_split, the router fold, small_f32_gemm, gemm_q4k_frag), the L2 / q-k-v decode A/B in two
# interleaved rounds, the small F32 and fragment-kernel prefill A/B (the pp column of the same runs), and the Qwen3 model suite with every opt-in on. Pack as call1.sh.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=$O/r; mkdir -p "$R"; nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B DS4_BIN=$B
export DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf
f=/dev/shm/q30b-q4km.gguf
( [ -f $f ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out $f > "$R/synth.txt" 2>&1 ) &
SY=$!
timeout 90 "$B/cudabackend_ops_test" --gtest_filter='*KvStore*:*QkNormRope*:*Matmul*:*Router*' > "$R/ops.txt" 2>&1
echo "== ops rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/ops.txt" | head
DS4_CUDA_FUSE_QKV=1 DS4_CUDA_SMALL_F32_GEMM=1 timeout 60 "$B/cudabackend_ops_test" --gtest_filter='*Matmul*:*SmallF32*' > "$R/ops-optin.txt" 2>&1
echo "== ops FUSE_QKV=1 SMALL_F32_GEMM=1 rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/ops-optin.txt" | head
timeout 60 "$B/cudabackend_f16_prefill_test" > "$R/f16.txt" 2>&1
echo "== f16 prefill suite (incl. the fragment kernel called directly) rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/f16.txt" | head
DS4_CUDA_GEMM_FRAG=1 timeout 60 "$B/cudabackend_f16_prefill_test" > "$R/f16-frag.txt" 2>&1
echo "== f16 prefill suite GEMM_FRAG=1 rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/f16-frag.txt" | head
wait $SY; echo "== synth $(el) s"
D="--ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512"
dec() { local name=$1; shift; env DS4_CUDA_STEP_TIMING=1 "$@" timeout 60 "$B/ds4-bench" -m $f --backend cuda $D > /dev/null 2> "$R/d-$name.txt"
  echo "== $name rc=$? $(el) s $(grep -E 'ctx ' "$R/d-$name.txt" | head -1 | sed 's/.*prefill/pp/' | cut -c1-60) | $(sed -n 's/.*device time per replay median \([0-9.]*\) ms.*/\1 ms/p' "$R/d-$name.txt" | tail -1)"; }
for i in $(seq 1 ${ROUNDS:-2}); do
  dec ahead0-$i DS4_CUDA_L2_AHEAD=0
  dec ahead1-$i DS4_CUDA_L2_AHEAD=1
  dec ahead2-$i DS4_CUDA_L2_AHEAD=2
  dec qkv1-$i DS4_CUDA_FUSE_QKV=1
  dec f32gemm1-$i DS4_CUDA_SMALL_F32_GEMM=1
  dec frag1-$i DS4_CUDA_GEMM_FRAG=1
  dec frag1f32-$i DS4_CUDA_GEMM_FRAG=1 DS4_CUDA_SMALL_F32_GEMM=1
done
DS4_CUDA_L2_AHEAD=2 DS4_CUDA_FUSE_QKV=1 DS4_CUDA_SMALL_F32_GEMM=1 DS4_CUDA_GEMM_FRAG=1 timeout 120 "$B/cudabackend_model_test" > "$R/model-optin.txt" 2>&1
echo "== model suite, every opt-in on, rc=$? $(el) s"; grep -E "PASSED|FAILED" "$R/model-optin.txt" | head
tar czf "$O/callA.tgz" -C "$O" r && rm -rf "$R"
echo "all done $(el) s"
