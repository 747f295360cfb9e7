#!/bin/bash
# Session 2026-12-07e, third call: branch fuse (work + two decode fusions for issue 13: qk_norm_rope_store = per-head
# norms, RoPE and the kv_store in one launch; router_softmax_topk = the router's F32 product and its top-k in one
# launch, the last block routing). Packed with `bash bench/cuda-correctness.sh --pack build-cuda` (glm-routed.gguf
# moved aside); carry [".gpurun"].
# 1) the new ops tests and the CUDA suites that run Qwen3 end to end (op by op and replayed) with the fusions on;
# 2) Qwen3-30B-A3B-shaped q4_k_m decode at depth 512, fusions on / off (DS4_CUDA_FUSE_KV, DS4_CUDA_FUSE_ROUTER),
#    twice each, interleaved; the down staging (DS4_CUDA_DOWN_STAGE=1) at 1 and 8 sequences;
# 3) expert windows (the new swap default 1:2:4) against the expert cache on 512-token prompt chunks and a longer
#    decode (3,072 of 6,144 experts on the GPU): whether `auto` should take the windows.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
R=$O/r; mkdir -p "$R"; nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B DS4_BIN=$B
export DS4_CUDA_TEST_Q4KM=$PWD/.gpurun/q4km.gguf
f=/dev/shm/q30b-q4km.gguf
( [ -f $f ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out $f > "$R/synth.txt" 2>&1 ) &
SY=$!
timeout 120 "$B/cudabackend_ops_test" --gtest_filter='*QkNormRope*:*Router*:*Routing*:*KvStore*:*Rope*:*RmsNorm*' > "$R/ops.txt" 2>&1
echo "== ops rc=$? $(el) s"; grep -E "PASSED|FAILED|Failure" "$R/ops.txt" | head
timeout 200 "$B/cudabackend_model_test" > "$R/model.txt" 2>&1
echo "== model suite rc=$? $(el) s"; grep -E "PASSED|FAILED" "$R/model.txt" | head
wait $SY; echo "== synth $(el) s"
D="--ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 128 --prefill-chunk 512"
dec() { local name=$1; shift; env "$@" timeout 60 "$B/ds4-bench" -m $f --backend cuda $D --json "$R/d-$name.json" > /dev/null 2> "$R/d-$name.txt"
  echo "== $name rc=$? $(el) s $(grep -E 'ctx ' "$R/d-$name.txt" | head -1 | cut -c1-120)"; }
for i in 1 2; do
  dec fused-$i DS4_CUDA_FUSE_KV=1
  dec unfused-$i DS4_CUDA_FUSE_KV=0 DS4_CUDA_FUSE_ROUTER=0
done
dec kv-only DS4_CUDA_FUSE_ROUTER=0
for s in 0 1; do
  env DS4_CUDA_DOWN_STAGE=$s timeout 60 "$B/ds4-bench" -m $f --backend cuda $D --parallel 8 --json "$R/p8-stage$s.json" > /dev/null 2> "$R/p8-stage$s.txt"
  echo "== N=8 stage=$s rc=$? $(el) s $(grep -E 'ctx ' "$R/p8-stage$s.txt" | head -1 | cut -c1-120)"
done
dec stage1 DS4_CUDA_DOWN_STAGE=1
W="--ctx-start 512 --ctx-max 2048 --step-mul 4 --gen-tokens 256 --prefill-chunk 512"
S="--ssd-streaming --ssd-streaming-cache-experts 3072"
for m in on off; do
  timeout 150 "$B/ds4-bench" -m $f $W $S --ssd-streaming-windows $m --json "$R/w-$m.json" > /dev/null 2> "$R/w-$m.txt"
  echo "== windows $m rc=$? $(el) s"; grep -E "ctx |expert windows:|error" "$R/w-$m.txt" | cut -c1-200
done
tar czf "$O/call3.tgz" -C "$O" r && rm -rf "$R"
echo "all done $(el) s"
