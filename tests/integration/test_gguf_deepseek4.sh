#!/usr/bin/env bash
# ds4-gguf synth --arch deepseek4: the tiny preset in f32 and in the published
# q2 mix -> inspect shows the layer schedule and the quant mix; llama.cpp (the
# oracle) loads both files and gives finite, position-dependent logits on
# fresh token ids; truncated copies fail with one sentence (exit 1); bad
# command lines exit 2. Seed, token ids and cut points are fresh each run.
set -u
: "${DS4_BIN:?DS4_BIN must name the build directory}"
TOOL="$DS4_BIN/ds4-gguf"
LL="$DS4_BIN/tests/llama_logits"
SEED=${DS4_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
RANDOM=$((SEED % 32768))
echo "seed $SEED (rerun with DS4_TEST_SEED=$SEED)"
WORK=$(mktemp -d /tmp/ds4_gguf_deepseek4.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

[ -x "$TOOL" ] || { echo "FAIL: $TOOL is not built"; exit 1; }

# expect CODE DESCRIPTION -- COMMAND...: exit status CODE, and for errors
# exactly one stderr line starting "ds4-gguf: ".
expect() {
    local want=$1 what=$2
    shift 3
    "$@" >"$WORK/out" 2>"$WORK/err"
    local rc=$?
    if [ "$rc" -ge 128 ]; then fail "$what: killed by signal $((rc - 128))"; return; fi
    if [ "$rc" -ne "$want" ]; then fail "$what: exit $rc, wanted $want; stderr: $(head -c 300 "$WORK/err")"; return; fi
    if [ "$want" -ne 0 ]; then
        local lines
        lines=$(wc -l <"$WORK/err")
        [ "$lines" -eq 1 ] || fail "$what: $lines stderr lines, wanted 1: $(head -c 300 "$WORK/err")"
        grep -q '^ds4-gguf: .' "$WORK/err" || fail "$what: stderr does not start with 'ds4-gguf: ': $(head -c 200 "$WORK/err")"
    fi
}

# has FILE DESCRIPTION EREGEX: the inspect output holds a line matching EREGEX.
has() { grep -Eq -- "$3" "$1" || fail "$2 (no line matching '$3')"; }

F32="$WORK/tiny-f32.gguf"
Q2="$WORK/tiny-q2.gguf"

# ---- f32: schedule, tensor names and shapes, metadata -------------------------
expect 0 "synth tiny f32" -- "$TOOL" synth --arch deepseek4 --preset tiny --quant f32 --out "$F32" --seed "$SEED"
grep -q "seed $SEED" "$WORK/out" || fail "synth does not report its seed: $(cat "$WORK/out")"
expect 0 "inspect tiny f32" -- "$TOOL" inspect "$F32"
cp "$WORK/out" "$WORK/f32.txt"
I="$WORK/f32.txt"
has "$I" "schedule header" '^deepseek4 layer schedule: 5 layers, sliding window 32, indexer top-k 16, 3 hash-routed, 4 hyper-connection streams$'
has "$I" "per-layer schedule" '^  0-4 +D/h +D/h +C4/h +C128/s +C4/s$'
has "$I" "schedule counts" '^  counts: 2 dense, 2 ratio-4, 1 ratio-128; 3 hash-routed, 2 scored MoE; 1 extra ratio entries \(MTP\)$'
grep -q 'warning:' "$I" && fail "the schedule disagrees with the tensors: $(grep warning: "$I")"
has "$I" "f32 quant mix" '^  routed gate +f32 x5$'
has "$I" "f32 quant mix" '^  hash routing +i32 x3$'
has "$I" "architecture" 'general.architecture .*"deepseek4"'
has "$I" "tokenizer pre" 'tokenizer.ggml.pre .*"deepseek-v3"'
has "$I" "129,280 tokens" 'tokenizer.ggml.tokens .*array\[string\] x129280'
has "$I" "the DeepSeek V4 chat template" 'tokenizer.chat_template .*"'
has "$I" "compress ratios" 'deepseek4.attention.compress_ratios .*array\[i32\] x6 +\[0, 0, 4, 128, 4, \.\.\.\]'
has "$I" "hyper-connection fn" '^  blk\.0\.hc_attn_fn\.weight +f32 +1024 x 24 '
has "$I" "ratio-4 compressor" '^  blk\.2\.attn_compressor_kv\.weight +f32 +256 x 128 '
has "$I" "ratio-128 compressor" '^  blk\.3\.attn_compressor_ape\.weight +f32 +64 x 128 '
has "$I" "indexer" '^  blk\.4\.indexer\.attn_q_b\.weight +f32 +64 x 512 '
has "$I" "hash routing table" '^  blk\.2\.ffn_gate_tid2eid\.weight +i32 +2 x 129280 '
has "$I" "selection bias" '^  blk\.3\.exp_probs_b\.bias +f32 +8 '
has "$I" "grouped output" '^  blk\.1\.attn_output_a\.weight +f32 +128 x 128 '
has "$I" "output head" '^  output\.weight +f32 +256 x 129280 '
grep -Eq '^  blk\.3\.indexer' "$I" && fail "ratio-128 layer 3 has indexer tensors"
grep -Eq '^  blk\.[01]\.attn_compressor' "$I" && fail "dense layers 0-1 have compressor tensors"
grep -Eq '^  blk\.[34]\.ffn_gate_tid2eid' "$I" && fail "scored layers 3-4 have hash tables"

# ---- q2: the published mix -----------------------------------------------------
expect 0 "synth tiny q2" -- "$TOOL" synth --arch deepseek4 --preset tiny --quant q2 --out "$Q2" --seed "$SEED"
expect 0 "inspect tiny q2" -- "$TOOL" inspect "$Q2"
cp "$WORK/out" "$WORK/q2.txt"
I="$WORK/q2.txt"
has "$I" "q2 schedule" '^  0-4 +D/h +D/h +C4/h +C128/s +C4/s$'
has "$I" "q2 routed gate" '^  routed gate +iq2_xxs x5$'
has "$I" "q2 routed up" '^  routed up +iq2_xxs x5$'
has "$I" "q2 routed down" '^  routed down +q2_K x5$'
has "$I" "q2 attention" '^  attention +q8_0 x25$'
has "$I" "q2 shared expert" '^  shared expert +q8_0 x15$'
has "$I" "q2 output" '^  output +q8_0 x1$'
has "$I" "q2 embedding" '^  embedding +f16 x1$'
has "$I" "q2 router" '^  router +f16 x5$'
has "$I" "q2 hyper-connection" '^  hyper-connection +f16 x11, f32 x22$'
has "$I" "q2 compressor" '^  compressor +f16 x9$'
has "$I" "q2 indexer" '^  indexer +f16 x10$'
has "$I" "q2 norms" '^  norms +f32 x'
has "$I" "q2 sinks" '^  attention sinks +f32 x5$'
has "$I" "q2 tensor types" '^  blk\.4\.ffn_down_exps\.weight +q2_K +256 x 256 x 8 '
[ "$(stat -c %s "$Q2")" -lt "$(stat -c %s "$F32")" ] || fail "the q2 file is not smaller than the f32 one"

# Same seed, same bytes (random blocks are a function of seed and position).
expect 0 "synth q2 again" -- "$TOOL" synth --arch deepseek4 --preset tiny --quant q2 --out "$WORK/again.gguf" --seed "$SEED"
cmp -s "$Q2" "$WORK/again.gguf" || fail "two q2 syntheses with seed $SEED differ"
rm -f "$WORK/again.gguf"

# ---- llama.cpp loads both and computes finite, position-dependent logits -------
if [ ! -x "$LL" ]; then
    fail "$LL is not built (the oracle check cannot run)"
else
    T=7
    ids=""
    for _ in $(seq $T); do ids="$ids $(( (RANDOM * 32768 + RANDOM) % 128000 ))"; done
    echo "$ids" >"$WORK/ids.txt"
    for f in "$F32" "$Q2"; do
        if ! "$LL" -m "$f" --token-ids "$WORK/ids.txt" --dump-logits "$WORK/logits.bin" -t 2 2>"$WORK/ll.err"; then
            fail "llama.cpp cannot run $(basename "$f"): $(grep -v '^$' "$WORK/ll.err" | tail -3)"
            continue
        fi
        python3 - "$WORK/logits.bin" 129280 $T <<'PY' || fail "llama.cpp logits of $(basename "$f") are not sane (seed $SEED, ids:$ids)"
import array, math, sys
a = array.array('f'); a.frombytes(open(sys.argv[1], 'rb').read())
V, T = int(sys.argv[2]), int(sys.argv[3])
assert len(a) == V * T, (len(a), V * T)
rows = [a[t * V:(t + 1) * V] for t in range(T)]
for t, row in enumerate(rows):
    assert all(math.isfinite(x) for x in row), f"row {t} not finite"
    mean = sum(row) / V
    sd = math.sqrt(sum((x - mean) ** 2 for x in row) / V)
    # Random unit-scale weights: logits spread around unit scale, not
    # collapsed to a constant and not blown up.
    assert 0.3 < sd < 3, f"row {t}: standard deviation {sd}"
# Different tokens at different positions give different logits.
for t in range(1, T):
    d = math.sqrt(sum((x - y) ** 2 for x, y in zip(rows[t], rows[0])) / V)
    assert d > 1e-3, f"rows 0 and {t} are the same"
PY
    done
fi

# ---- a deepseek4 file made by llama.cpp's own generator: same schedule reading --
ARCHS="${DS4_DEPS_DIR:-$DS4_SOURCE_DIR/.deps}/oracle/bin/test-llama-archs"
if [ ! -x "$ARCHS" ]; then
    fail "$ARCHS is not built (the cross-check on llama.cpp's deepseek4 file cannot run)"
else
    mkdir -p "$WORK/archs"
    LD_LIBRARY_PATH="$(dirname "$ARCHS"):${LD_LIBRARY_PATH:-}" "$ARCHS" -a '^deepseek4$' -s "$SEED" -o "$WORK/archs" >"$WORK/archs.log" 2>&1
    A=$(ls "$WORK"/archs/deepseek4*.gguf 2>/dev/null | head -1)
    if [ -z "$A" ]; then
        fail "test-llama-archs wrote no deepseek4 file: $(tail -3 "$WORK/archs.log")"
    else
        expect 0 "inspect test-llama-archs deepseek4" -- "$TOOL" inspect "$A"
        has "$WORK/out" "llama.cpp file schedule" '^  0-3 +D/s +D/s +C4/s +C128/s$'
        has "$WORK/out" "llama.cpp file counts" '^  counts: 2 dense, 1 ratio-4, 1 ratio-128; 0 hash-routed, 4 scored MoE$'
        has "$WORK/out" "llama.cpp file scale tensors" '^  weight scales +f32 x'
        grep -q 'warning:' "$WORK/out" && fail "schedule warnings on llama.cpp's file: $(grep warning: "$WORK/out")"
        rm -rf "$WORK/archs"
    fi
fi

# ---- truncated copies: exit 1, one sentence, no signal ------------------------
size=$(stat -c %s "$Q2")
data_at=$(sed -n 's/.*tensor data at byte \([0-9]*\).*/\1/p' "$WORK/q2.txt")
cuts="0 8 $((data_at - 1)) $data_at $((size - 1))"
for _ in $(seq 3); do cuts="$cuts $(( (RANDOM * 32768 + RANDOM) % data_at ))"; done                  # header
for _ in $(seq 3); do cuts="$cuts $(( data_at + (RANDOM * 32768 + RANDOM) % (size - data_at) ))"; done # data
for cut in $cuts; do
    head -c "$cut" "$Q2" >"$WORK/cut.gguf"
    expect 1 "truncated at byte $cut of $size" -- "$TOOL" inspect "$WORK/cut.gguf"
done
rm -f "$WORK/cut.gguf"

# ---- bad command lines: exit 2, nothing written --------------------------------
expect 2 "bad quant" -- "$TOOL" synth --arch deepseek4 --preset tiny --quant q3 --out "$WORK/x.gguf"
expect 2 "bad preset" -- "$TOOL" synth --arch deepseek4 --preset huge --out "$WORK/x.gguf"
expect 2 "--type is for qwen3moe" -- "$TOOL" synth --arch deepseek4 --preset tiny --type q8_0 --out "$WORK/x.gguf"
expect 2 "--quant is for deepseek4" -- "$TOOL" synth --arch qwen3moe --preset tiny --quant q2 --out "$WORK/x.gguf"
[ -e "$WORK/x.gguf" ] && fail "a refused synth command wrote its output"
expect 1 "missing chat template file" -- "$TOOL" synth --arch deepseek4 --preset tiny --out "$WORK/y.gguf" --template-file "$WORK/none.jinja"

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s); seed $SEED"
    exit 1
fi
echo "ok"
