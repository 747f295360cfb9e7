#!/usr/bin/env bash
# End to end through the real programs: synthesize a tiny Qwen3-MoE with the
# real tokenizer, then run ds4 with a prompt, in interactive mode from a pipe,
# and check what a user sees: the model map line, generated text, the speed
# line, reproducible sampling with a seed, and clean exits.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

source "$(dirname "$0")/seed.sh"  # seed (DS4_TEST_SEED), RANDOM seeded with it
"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null

# One prompt, greedy.
"$bin/ds4" -m "$tmp/m.gguf" -p "Hello, who are you?" -n 12 --temp 0 -t 2 >"$tmp/out" 2>"$tmp/err" \
  || fail "ds4 -p exited $? (seed $seed): $(cat "$tmp/err")"
grep -q "^model map: 1 region across [0-9]* tensor spans" "$tmp/err" || fail "no single-region model map line: $(cat "$tmp/err")"
# --backend auto (the default) names its choice; this machine has no GPU.
grep -qE "^backend: cpu, [0-9]+ threads? \(auto: (no CUDA GPU on this machine|this build has no CUDA)\)$" "$tmp/err" \
  || fail "no startup line naming the automatic backend choice: $(cat "$tmp/err")"
grep -q "prefill: [0-9.]* t/s, generation: [0-9.]* t/s" "$tmp/err" || fail "no speed line: $(cat "$tmp/err")"
[[ -s "$tmp/out" ]] || fail "no text generated (seed $seed)"

# Greedy is deterministic; a fixed sampling seed is reproducible.
"$bin/ds4" -m "$tmp/m.gguf" -p "Hello, who are you?" -n 12 --temp 0 -t 1 >"$tmp/out2" 2>/dev/null
cmp -s "$tmp/out" "$tmp/out2" || fail "greedy output differs between runs (threads 2 vs 1)"
s=$RANDOM
"$bin/ds4" -m "$tmp/m.gguf" -p "Tell me a story." -n 16 --temp 1.0 --top-k 0 --top-p 1 --seed $s >"$tmp/a" 2>/dev/null
"$bin/ds4" -m "$tmp/m.gguf" -p "Tell me a story." -n 16 --temp 1.0 --top-k 0 --top-p 1 --seed $s >"$tmp/b" 2>/dev/null
cmp -s "$tmp/a" "$tmp/b" || fail "same --seed $s gave different text"

# --nothink and a system prompt go through the chat template.
"$bin/ds4" -m "$tmp/m.gguf" -sys "You are terse." -p "Hi" --nothink -n 4 --temp 0 >/dev/null 2>"$tmp/err" \
  || fail "--nothink -sys run failed: $(cat "$tmp/err")"

# Prompt file with a chunked prefill.
printf 'A longer prompt that spans several prefill chunks of a few tokens each.' >"$tmp/p.txt"
"$bin/ds4" -m "$tmp/m.gguf" --prompt-file "$tmp/p.txt" --prefill-chunk 3 -n 4 --temp 0 >/dev/null 2>"$tmp/err" \
  || fail "--prompt-file run failed: $(cat "$tmp/err")"

# Interactive chat from a pipe: two turns, then end of input.
printf 'Hello\nSecond question\n' | "$bin/ds4" -m "$tmp/m.gguf" -n 6 --temp 0 >"$tmp/chat" 2>"$tmp/err" \
  || fail "interactive mode exited $?: $(cat "$tmp/err")"
[[ $(grep -c "generation:" "$tmp/err") -eq 2 ]] || fail "expected two replies in the interactive run: $(cat "$tmp/err")"

# Context too small for the prompt: a sentence and exit 1, not a crash.
set +e
"$bin/ds4" -m "$tmp/m.gguf" -p "This prompt does not fit in eight tokens of context at all." -c 8 -n 4 >/dev/null 2>"$tmp/err"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "tiny --ctx: expected exit 1, got $rc"
[[ $(wc -l <"$tmp/err") -ge 1 ]] && grep -q "ctx" "$tmp/err" || fail "tiny --ctx: no sentence naming --ctx: $(cat "$tmp/err")"
# DeepSeek V4 (tiny, published q2 mix, real tokenizer and V4 template): one
# prompt in each thinking mode and a two-turn chat, whose second turn cannot
# rewind the ring caches and prefills again.
"$bin/ds4-gguf" synth --arch deepseek4 --preset tiny --quant q2 --seed "$seed" --out "$tmp/d.gguf" >/dev/null
for mode in --nothink --think --think-max; do
  "$bin/ds4" -m "$tmp/d.gguf" -p "Hello" $mode -n 6 --temp 0 >"$tmp/dout" 2>"$tmp/err" \
    || fail "deepseek4 $mode run failed: $(cat "$tmp/err")"
  grep -q "generation:" "$tmp/err" || fail "deepseek4 $mode: no speed line"
done
printf 'Hello\nSecond question\n' | "$bin/ds4" -m "$tmp/d.gguf" -n 4 --temp 0 >/dev/null 2>"$tmp/err" \
  || fail "deepseek4 interactive mode exited $?: $(cat "$tmp/err")"
[[ $(grep -c "generation:" "$tmp/err") -eq 2 ]] || fail "deepseek4: expected two replies: $(cat "$tmp/err")"
echo "ok (seed $seed)"
