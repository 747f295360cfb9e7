#!/usr/bin/env bash
# ds4-gguf end to end: synth -> inspect, llama.cpp loads the synthetic model,
# truncated and foreign files fail with one sentence (exit 1, no signal),
# bad command lines exit 2. Cut points and token ids are fresh each run.
set -u
: "${DS4_BIN:?DS4_BIN must name the build directory}"
TOOL="$DS4_BIN/ds4-gguf"
SEED=${DS4_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
RANDOM=$((SEED % 32768))
echo "seed $SEED (rerun with DS4_TEST_SEED=$SEED)"
WORK=$(mktemp -d /tmp/ds4_gguf_tool.XXXXXX)
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

# ---- synth, then inspect ------------------------------------------------------
M="$WORK/tiny.gguf"
expect 0 "synth tiny" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$M" --seed "$SEED"
grep -q "seed $SEED" "$WORK/out" || fail "synth does not report its seed: $(cat "$WORK/out")"
expect 0 "inspect tiny" -- "$TOOL" inspect "$M"
cp "$WORK/out" "$WORK/inspect.txt"
grep -q "model map: 1 region across 51 tensor spans" "$WORK/inspect.txt" || fail "inspect lacks the one-region model map line"
grep -q 'general.architecture .*"qwen3moe"' "$WORK/inspect.txt" || fail "inspect lacks the architecture"
grep -q 'tokenizer.ggml.tokens .*array\[string\] x151669' "$WORK/inspect.txt" || fail "inspect lacks the summarized token array"
grep -q 'tokenizer.chat_template' "$WORK/inspect.txt" || fail "inspect lacks the chat template"
grep -Eq '^  blk\.3\.ffn_down_exps\.weight +f32 +64 x 64 x 8 ' "$WORK/inspect.txt" || fail "inspect lacks blk.3.ffn_down_exps with its shape"
grep -Eq '^  output\.weight +f32 +64 x 151669 ' "$WORK/inspect.txt" || fail "inspect lacks output.weight"
grep -Eq '^  all +51 tensors' "$WORK/inspect.txt" || fail "inspect lacks the totals"

# Same seed, same bytes; another seed, other bytes.
expect 0 "synth again" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/again.gguf" --seed "$SEED"
cmp -s "$M" "$WORK/again.gguf" || fail "two syntheses with seed $SEED differ"
expect 0 "synth other seed" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/other.gguf" --seed $((SEED + 1))
cmp -s "$M" "$WORK/other.gguf" && fail "seeds $SEED and $((SEED + 1)) give the same file"
rm -f "$WORK/again.gguf" "$WORK/other.gguf"

# Quantized variants: smaller, and typed as asked.
expect 0 "synth q8_0" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/q8.gguf" --type q8_0 --embd-type f16
expect 0 "inspect q8_0" -- "$TOOL" inspect "$WORK/q8.gguf"
grep -Eq '^  blk\.0\.attn_q\.weight +q8_0 ' "$WORK/out" || fail "q8_0 synth has no q8_0 attn_q"
grep -Eq '^  token_embd\.weight +f16 ' "$WORK/out" || fail "--embd-type f16 not applied"
grep -Eq '^  blk\.0\.ffn_gate_inp\.weight +f32 ' "$WORK/out" || fail "the router must stay f32"

# llama.cpp (the oracle) must load the synthetic files and give finite,
# unit-scale logits on fresh token ids.
LL="$DS4_BIN/tests/llama_logits"
if [ ! -x "$LL" ]; then
    fail "$LL is not built (the oracle check cannot run)"
else
    ids=""
    for _ in $(seq 6); do ids="$ids $(( (RANDOM * 32768 + RANDOM) % 151643 ))"; done
    echo "$ids" >"$WORK/ids.txt"
    for f in "$M" "$WORK/q8.gguf"; do
        if ! "$LL" -m "$f" --token-ids "$WORK/ids.txt" --dump-logits "$WORK/logits.bin" -t 2 2>"$WORK/ll.err"; then
            fail "llama.cpp cannot run $(basename "$f"): $(tail -3 "$WORK/ll.err")"
            continue
        fi
        python3 - "$WORK/logits.bin" 151669 6 <<'PY' || fail "llama.cpp logits of $(basename "$f") are not sane (ids:$ids)"
import array, math, sys
a = array.array('f'); a.frombytes(open(sys.argv[1], 'rb').read())
V, T = int(sys.argv[2]), int(sys.argv[3])
assert len(a) == V * T, (len(a), V * T)
for t in range(T):
    row = a[t * V:(t + 1) * V]
    assert all(math.isfinite(x) for x in row), f"row {t} not finite"
    rms = math.sqrt(sum(x * x for x in row) / V)
    assert 0.2 < rms < 5, f"row {t}: rms {rms}"
PY
    done
fi

# ---- bad files: exit 1, one sentence, no signal --------------------------------
size=$(stat -c %s "$M")
data_at=$(sed -n 's/.*tensor data at byte \([0-9]*\).*/\1/p' "$WORK/inspect.txt")
cuts="0 1 3 4 7 8 15 16 23 24 $((data_at - 1)) $data_at $((data_at + 1)) $((size - 1))"
for _ in $(seq 6); do cuts="$cuts $(( (RANDOM * 32768 + RANDOM) % data_at ))"; done   # inside the header
for _ in $(seq 4); do cuts="$cuts $(( data_at + (RANDOM * 32768 + RANDOM) % (size - data_at) ))"; done  # inside the data
for cut in $cuts; do
    head -c "$cut" "$M" >"$WORK/cut.gguf"
    expect 1 "truncated at byte $cut of $size" -- "$TOOL" inspect "$WORK/cut.gguf"
done
rm -f "$WORK/cut.gguf"

# A header byte flipped at random: either still valid or one sentence.
for _ in $(seq 8); do
    cp "$M" "$WORK/flip.gguf"
    pos=$(( (RANDOM * 32768 + RANDOM) % data_at ))
    printf "\\x$(printf %02x $((RANDOM % 256)))" | dd of="$WORK/flip.gguf" bs=1 seek="$pos" conv=notrunc status=none
    "$TOOL" inspect "$WORK/flip.gguf" >/dev/null 2>"$WORK/err"
    rc=$?
    [ "$rc" -lt 128 ] || fail "byte $pos changed: killed by signal $((rc - 128))"
    [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || fail "byte $pos changed: exit $rc"
    [ "$rc" -eq 0 ] || [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "byte $pos changed: not one stderr line"
done
rm -f "$WORK/flip.gguf"

printf 'this is not a gguf file at all, just text\n' >"$WORK/text.txt"
expect 1 "text file" -- "$TOOL" inspect "$WORK/text.txt"
: >"$WORK/empty.gguf"
expect 1 "empty file" -- "$TOOL" inspect "$WORK/empty.gguf"
expect 1 "missing file" -- "$TOOL" inspect "$WORK/no-such-file.gguf"
expect 1 "directory" -- "$TOOL" inspect "$WORK"
expect 1 "unwritable output" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/no/such/dir/m.gguf" --seed 1
expect 1 "tokenizer dir without tokenizer.json" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/t.gguf" --tokenizer-dir "$WORK"
expect 1 "glm-dsa tokenizer dir without tokenizer.json" -- "$TOOL" synth --arch glm-dsa --preset tiny --out "$WORK/t.gguf" --tokenizer-dir "$WORK"
expect 1 "glm-dsa missing chat template file" -- "$TOOL" synth --arch glm-dsa --preset tiny --out "$WORK/t.gguf" --template-file "$WORK/none.jinja"

# ---- bad command lines: exit 2 -------------------------------------------------
expect 2 "no command" -- "$TOOL"
expect 2 "unknown command" -- "$TOOL" frobnicate
expect 2 "inspect without file" -- "$TOOL" inspect
expect 2 "inspect two files" -- "$TOOL" inspect "$M" "$M"
expect 2 "unknown inspect flag" -- "$TOOL" inspect --bogus "$M"
expect 2 "synth without --out" -- "$TOOL" synth --arch qwen3moe --preset tiny
expect 2 "synth without --arch" -- "$TOOL" synth --preset tiny --out "$WORK/x.gguf"
expect 2 "synth bad arch" -- "$TOOL" synth --arch llama --preset tiny --out "$WORK/x.gguf"
expect 2 "synth bad preset" -- "$TOOL" synth --arch qwen3moe --preset huge --out "$WORK/x.gguf"
expect 2 "synth bad type" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/x.gguf" --type q4_k
expect 2 "synth bad seed" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/x.gguf" --seed -5
expect 2 "synth --seed without value" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/x.gguf" --seed
expect 2 "synth unknown flag" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/x.gguf" --layers 3
# glm-dsa: micro's 16 tokens fit no tokenizer; --no-tokenizer takes no tokenizer or template flags.
expect 2 "glm-dsa micro with a tokenizer" -- "$TOOL" synth --arch glm-dsa --preset micro --out "$WORK/x.gguf"
expect 2 "glm-dsa --no-tokenizer --template-file" -- "$TOOL" synth --arch glm-dsa --preset tiny --no-tokenizer --template-file "$M" --out "$WORK/x.gguf"
# glm-dsa --quant: q2 (llama-quantize's Q2_K mix) only, and not with --type or --embd-type.
expect 2 "glm-dsa --quant q4" -- "$TOOL" synth --arch glm-dsa --preset tiny --quant q4 --out "$WORK/x.gguf"
expect 2 "glm-dsa --quant q2 --type" -- "$TOOL" synth --arch glm-dsa --preset tiny --quant q2 --type q8_0 --out "$WORK/x.gguf"
expect 2 "glm-dsa --embd-type" -- "$TOOL" synth --arch glm-dsa --preset tiny --embd-type q8_0 --out "$WORK/x.gguf"
# --n-layer: 1 <= N <= the preset's layers (qwen3moe tiny 4, deepseek4 tiny 5, flash 43, pro 61).
expect 2 "synth --n-layer 0" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/x.gguf" --n-layer 0
expect 2 "synth --n-layer 0 deepseek4" -- "$TOOL" synth --arch deepseek4 --preset tiny --out "$WORK/x.gguf" --n-layer 0
expect 2 "synth --n-layer past qwen3moe tiny" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/x.gguf" \
    --n-layer $((5 + RANDOM % 100))
expect 2 "synth --n-layer past deepseek4 tiny" -- "$TOOL" synth --arch deepseek4 --preset tiny --out "$WORK/x.gguf" \
    --n-layer $((6 + RANDOM % 100))
expect 2 "synth --n-layer 44 flash" -- "$TOOL" synth --arch deepseek4 --preset flash --quant q2 --out "$WORK/x.gguf" --n-layer 44
expect 2 "synth --n-layer 62 pro" -- "$TOOL" synth --arch deepseek4 --preset pro --out "$WORK/x.gguf" --n-layer 62
expect 2 "synth --n-layer -1" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/x.gguf" --n-layer -1
expect 2 "synth --n-layer 99999999999" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/x.gguf" --n-layer 99999999999
for bad in abc 2.5 2x '' ' 2' 0x2; do
    expect 2 "synth --n-layer '$bad'" -- "$TOOL" synth --arch deepseek4 --preset tiny --out "$WORK/x.gguf" --n-layer "$bad"
    grep -q -- '--n-layer' "$WORK/err" || fail "--n-layer '$bad': the message does not name the flag: $(cat "$WORK/err")"
done
expect 2 "synth --n-layer without value" -- "$TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/x.gguf" --n-layer
[ -e "$WORK/x.gguf" ] && fail "a refused synth command wrote its output"
expect 0 "help" -- "$TOOL" --help
grep -q "synth" "$WORK/out" || fail "--help does not describe synth"
# bench/vs-llama.sh finds the truncation option this way.
[ "$(grep -o -- '--n-layers\?\b' "$WORK/out" | head -1)" = "--n-layer" ] || fail "--help does not offer --n-layer"

# A truncated qwen3moe tiny: block_count N, blocks 0..N-1 only.
n=$((1 + RANDOM % 3))
T="$WORK/trunc.gguf"
expect 0 "synth --n-layer $n" -- "$TOOL" synth --arch qwen3moe --preset tiny --no-tokenizer --n-layer "$n" --out "$T" --seed "$SEED"
expect 0 "inspect --n-layer $n" -- "$TOOL" inspect "$T"
grep -Eq "^  qwen3moe\.block_count +u32 +$n\$" "$WORK/out" || fail "--n-layer $n: block_count is not $n"
grep -Eq "^  blk\.$((n - 1))\.ffn_down_exps\.weight " "$WORK/out" || fail "--n-layer $n: no blk.$((n - 1))"
grep -Eq "^  blk\.$n\." "$WORK/out" && fail "--n-layer $n: the file has blk.$n"
grep -Eq "^  all +$((3 + 12 * n)) tensors" "$WORK/out" || fail "--n-layer $n: not $((3 + 12 * n)) tensors"
rm -f "$T"
expect 0 "version" -- "$TOOL" --version

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s); seed $SEED"
    exit 1
fi
echo "ok"
