#!/usr/bin/env bash
# --ssd-streaming end to end through ds4: routed experts read from the file
# into a bounded expert cache give the resident run's logits bit for bit (the
# CPU), for both families, at budgets from one token's experts to all of them,
# by count and by bytes and automatic, at prefill chunks drawn each run; the startup
# plan and the end-of-run cache line are printed; a failed read and a budget
# below one token's experts are one sentence and exit 1.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
seed=$RANDOM

# n random token ids below the vocabulary size v.
ids() { python3 -c "import random,sys; r=random.Random($seed); print(' '.join(str(r.randrange($2)) for _ in range($1)))"; }

for arch in qwen3moe deepseek4; do
  m=$tmp/$arch.gguf
  rm -f "$tmp"/res-*.bin
  "$bin/ds4-gguf" synth --arch "$arch" --preset tiny --no-tokenizer --seed "$seed" --out "$m" >/dev/null
  v=$("$bin/ds4-gguf" inspect "$m" | sed -n "s/^  $arch.vocab_size *u32 *\([0-9]*\)$/\1/p")
  [[ -n "$v" ]] || fail "$arch: no vocabulary size in the file"
  n=$((150 + RANDOM % 150))  # DeepSeek V4's tiny window (32), ratio-4 and ratio-128 blocks all work
  ids "$n" "$v" >"$tmp/ids.txt"

  # The plan names the working set; the smallest budget is one token's experts.
  "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/auto.bin" --ssd-streaming -t 2 2>"$tmp/err" \
    || fail "$arch: automatic budget failed (seed $seed): $(cat "$tmp/err")"
  plan=$(grep "^ssd-streaming: " "$tmp/err") || fail "$arch: no plan line: $(cat "$tmp/err")"
  total=$(sed -n 's/.*; \([0-9]*\) routed experts of .*/\1/p' <<<"$plan")
  per_token=$(sed -n 's/.*MoE blocks x \([0-9]*\)).*/\1/p' <<<"$plan")
  working=$(sed -n 's/.*working set \([0-9]*\) experts per token.*/\1/p' <<<"$plan")
  [[ -n "$total" && -n "$per_token" && -n "$working" ]] || fail "$arch: cannot read the plan: $plan"
  grep -q "^ds4: experts: [0-9]* lookups, [0-9]* hits" "$tmp/err" || fail "$arch: no cache line at the end: $(cat "$tmp/err")"
  grep -q "^model map: " "$tmp/err" || fail "$arch: no model map line"

  half=$(( working / 2 > per_token ? working / 2 : per_token ))
  # Every budget at a prefill chunk drawn from 1, 32 and 600 (fresh each run),
  # and the smallest budget, where the cache evicts hardest, at 1 and 600 both.
  chunks=(1 32 600)
  runs=("$per_token 1" "$per_token 600")
  for budget in "$half" "$working" "$total" "1GB" auto; do runs+=("$budget ${chunks[RANDOM % 3]}"); done
  for run in "${runs[@]}"; do
    read -r budget chunk <<<"$run"
    # The cache serves chunk x per_token experts per block at once: the
    # engine shrinks the chunk to fit, so the resident run uses the same.
    slots=$budget
    [[ $budget == 1GB || $budget == auto ]] && slots=$total
    eff=$(( chunk < slots / per_token ? chunk : slots / per_token ))
    res=$tmp/res-$eff.bin
    [[ -f $res ]] || "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$res" --prefill-chunk "$eff" -t 2 \
      2>/dev/null || fail "$arch: resident run failed"
    flags=(--ssd-streaming)
    [[ $budget != auto ]] && flags+=(--ssd-streaming-cache-experts "$budget")
    "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" --prefill-chunk "$chunk" -t 2 \
        "${flags[@]}" 2>"$tmp/err" || fail "$arch: budget $budget chunk $chunk failed (seed $seed): $(cat "$tmp/err")"
    cmp -s "$res" "$tmp/ssd.bin" \
      || fail "$arch: budget $budget, chunk $chunk: logits differ from the resident run (seed $seed)"
    if [[ $budget == "$per_token" ]]; then
      grep -q "less than twice the working set" "$tmp/err" || fail "$arch: no warning for a budget of $budget"
      grep -q " misses, " "$tmp/err" || fail "$arch: no cache statistics"
    fi
  done

  # A failed read (the test hook fails the 5th) ends the run with one sentence
  # naming the file, exit 1, and no logits written.
  rm -f "$tmp/x.bin"
  if DS4_TEST_FAIL_READ=5 "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/x.bin" --ssd-streaming \
       --ssd-streaming-cache-experts "$per_token" 2>"$tmp/err"; then
    fail "$arch: a failed expert read did not fail the run"
  fi
  grep -q "^ds4: reading expert [0-9]* of 'blk\.[0-9]*\.ffn_.*_exps\.weight' from $m failed: Input/output error" "$tmp/err" \
    || fail "$arch: unclear read failure: $(cat "$tmp/err")"
  [[ ! -e "$tmp/x.bin" ]] || fail "$arch: logits written after a failed read"

  # Below one token's experts: refused with one sentence before any token runs.
  if "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/x.bin" --ssd-streaming \
       --ssd-streaming-cache-experts $((per_token - 1 > 0 ? per_token - 1 : 0)) 2>"$tmp/err"; then
    fail "$arch: a budget under $per_token experts ran"
  fi
  [[ $(grep -c '^ds4: ' "$tmp/err") -ge 1 ]] && grep -q "needs at least $per_token experts" "$tmp/err" \
    || grep -q "ssd-streaming-cache-experts" "$tmp/err" || fail "$arch: unclear refusal: $(cat "$tmp/err")"
done
echo "ok: --ssd-streaming logits equal the resident run (seed $seed)"
