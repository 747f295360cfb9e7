#!/usr/bin/env bash
# --ssd-streaming end to end through ds4: routed experts read from the file
# into a bounded expert cache give the resident run's logits bit for bit (the
# CPU), for both families, at budgets from one expert to all of them,
# by count and by bytes and automatic, at prefill chunks, prefill strategies
# and read engines drawn each run; the startup plan and the end-of-run cache
# line are printed; a routing profile round trip; --simulate-used-memory
# shrinks the automatic budget by its amount; a failed read is one sentence
# and exit 1.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/seed.sh"  # seed (DS4_TEST_SEED), RANDOM seeded with it

# n random token ids below the vocabulary size v.
ids() { python3 -c "import random,sys; r=random.Random($seed); print(' '.join(str(r.randrange($2)) for _ in range($1)))"; }

for arch in qwen3moe deepseek4 glm-dsa; do
  m=$tmp/$arch.gguf
  rm -f "$tmp"/res-*.bin
  "$bin/ds4-gguf" synth --arch "$arch" --preset tiny --no-tokenizer --seed "$seed" --out "$m" >/dev/null
  v=$("$bin/ds4-gguf" inspect "$m" | sed -n "s/^  $arch.vocab_size *u32 *\([0-9]*\)$/\1/p")
  [[ -n "$v" ]] || fail "$arch: no vocabulary size in the file"
  n=$((150 + RANDOM % 150))  # DeepSeek V4's tiny window (32), ratio-4 and ratio-128 blocks all work
  ids "$n" "$v" >"$tmp/ids.txt"

  # The plan names the working set and the read engine.
  "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/auto.bin" --ssd-streaming -t 2 2>"$tmp/err" \
    || fail "$arch: automatic budget failed (seed $seed): $(cat "$tmp/err")"
  cp "$tmp/err" "$tmp/auto-err"
  plan=$(grep "^ssd-streaming: " "$tmp/err") || fail "$arch: no plan line: $(cat "$tmp/err")"
  total=$(sed -n 's/.*; \([0-9]*\) routed experts of .*/\1/p' <<<"$plan")
  per_token=$(sed -n 's/.*MoE blocks x \([0-9]*\)).*/\1/p' <<<"$plan")
  working=$(sed -n 's/.*working set \([0-9]*\) experts per token.*/\1/p' <<<"$plan")
  [[ -n "$total" && -n "$per_token" && -n "$working" ]] || fail "$arch: cannot read the plan: $plan"
  grep -q "^ds4: experts: [0-9]* lookups, [0-9]* hits" "$tmp/err" || fail "$arch: no cache line at the end: $(cat "$tmp/err")"
  grep -q "^model map: " "$tmp/err" || fail "$arch: no model map line"

  half=$(( working / 2 > 1 ? working / 2 : 1 ))
  # Every budget (one expert up to all of them) at a prefill chunk drawn from
  # 1, 32 and 600, a prefill strategy and a read engine drawn too (fresh
  # each run); the smallest budget, where the cache evicts hardest, at 1 and
  # 600 both.
  chunks=(1 32 600)
  strategies=(auto per-expert full-layer)
  engines=(auto pread)
  # io_uring by name only where the kernel gives it (sandboxes may refuse
  # it: auto then reads with pread, as the plan line says).
  grep -q "^experts: .*(io_uring, " "$tmp/auto-err" && engines+=(io_uring)
  runs=("1 1" "1 600")
  # 1GB: every expert of these tiny models, as a budget in bytes.
  for budget in "$half" "$working" "1GB" auto; do runs+=("$budget ${chunks[RANDOM % 3]}"); done
  for run in "${runs[@]}"; do
    read -r budget chunk <<<"$run"
    strategy=${strategies[RANDOM % 3]}
    io=${engines[RANDOM % ${#engines[@]}]}
    [[ $budget == 1 && $chunk == 600 ]] && strategy=per-expert  # the shrinking chunk, at least once
    # Per expert, the cache serves chunk x per_token experts per block at
    # once: the engine shrinks the chunk to what the slots and the scratch
    # (one token's experts, when the cache does not hold every expert) can
    # take, so the resident run uses the same chunk.
    eff=$chunk
    if [[ $strategy == per-expert ]]; then
      slots=$budget
      [[ $budget == 1GB || $budget == auto ]] && slots=$total
      capacity=$(( slots < total ? slots + per_token : total ))
      eff=$(( chunk < capacity / per_token ? chunk : capacity / per_token ))
    fi
    res=$tmp/res-$eff.bin
    [[ -f $res ]] || "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$res" --prefill-chunk "$eff" -t 2 \
      2>/dev/null || fail "$arch: resident run failed"
    overlap=$( (( RANDOM % 2 )) && echo on || echo off)  # misses read while the hits compute, or not
    ahead=$( (( RANDOM % 2 )) && echo on || echo off)    # the router lookahead's reads, or none
    flags=(--ssd-streaming --ssd-streaming-prefill "$strategy" --ssd-streaming-io "$io" --ssd-streaming-overlap "$overlap"
           --ssd-streaming-lookahead "$ahead")
    [[ $budget != auto ]] && flags+=(--ssd-streaming-cache-experts "$budget")
    what="budget $budget, chunk $chunk, $strategy, io $io, overlap $overlap, lookahead $ahead (seed $seed)"
    "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" --prefill-chunk "$chunk" -t 2 \
        "${flags[@]}" 2>"$tmp/err" || fail "$arch: $what failed: $(cat "$tmp/err")"
    cmp -s "$res" "$tmp/ssd.bin" || fail "$arch: $what: logits differ from the resident run"
    if [[ $budget == 1 ]]; then
      grep -q "less than twice the working set" "$tmp/err" || fail "$arch: no warning for a budget of $budget"
      grep -q " misses (" "$tmp/err" || fail "$arch: no cache statistics: $(cat "$tmp/err")"
    fi
    if [[ $strategy == full-layer && $chunk -gt 1 ]]; then
      grep -q " [1-9][0-9]* full-layer reads" "$tmp/err" || fail "$arch: $what: no full-layer read: $(cat "$tmp/err")"
    fi
    [[ $io == pread ]] && { grep -q "(pread, " "$tmp/err" || fail "$arch: $what: the plan does not name pread"; }
  done

  # A routing profile: written at exit, read back by the next run, which
  # preloads the hottest experts and still gives the same logits; a profile
  # of another model is ignored with a warning.
  prof=$tmp/$arch.profile
  flags=(--ssd-streaming --ssd-streaming-cache-experts "$working" --ssd-streaming-profile "$prof")
  "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" -t 2 "${flags[@]}" 2>"$tmp/err" \
    || fail "$arch: profiled run failed: $(cat "$tmp/err")"
  [[ $(head -1 "$prof") == "ds4-routing-profile 2" ]] || fail "$arch: no profile written"
  [[ $(tail -1 "$prof") == "end $(($(wc -l <"$prof") - 3))" ]] || fail "$arch: the profile's trailer does not count its lines"
  [[ $(wc -l <"$prof") -gt 3 ]] || fail "$arch: an empty profile"
  res=$(ls "$tmp"/res-*.bin | head -1)
  "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" -t 2 --prefill-chunk "$(basename "$res" .bin | cut -d- -f2)" \
      "${flags[@]}" --ssd-streaming-preload-experts 5 2>"$tmp/err" || fail "$arch: preloaded run failed: $(cat "$tmp/err")"
  grep -q "preloaded the hottest experts" "$tmp/err" || fail "$arch: no preload: $(cat "$tmp/err")"
  cmp -s "$res" "$tmp/ssd.bin" || fail "$arch: logits differ after a preload (seed $seed)"
  if [[ -f $tmp/qwen3moe.profile && $arch == deepseek4 ]]; then
    "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" -t 2 --ssd-streaming \
        --ssd-streaming-profile "$tmp/qwen3moe.profile" 2>"$tmp/err" || fail "$arch: a foreign profile failed the run"
    grep -q "recorded with another model file; ignoring it" "$tmp/err" || fail "$arch: foreign profile not refused"
  fi

  # Expert windows through the CLI (--ssd-streaming-windows on; the CPU's
  # windows are shared memory remapped like CUDA's device slots): a random
  # budget and chunk, the resident logits byte for byte, the plan and the
  # statistics printed; a profile written and read back (a warm start that
  # promotes the profile's hottest experts); a trace refused in one sentence.
  budget=$(( 1 + RANDOM % total )); chunk=$(( 1 + RANDOM % 40 ))
  res=$tmp/res-$chunk.bin
  [[ -f $res ]] || "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$res" --prefill-chunk "$chunk" -t 2 \
    2>/dev/null || fail "$arch: resident run failed"
  flags=(--ssd-streaming --ssd-streaming-windows on --ssd-streaming-cache-experts "$budget" --prefill-chunk "$chunk"
         --ssd-streaming-profile "$tmp/$arch.windows.profile")
  for pass in first warm; do
    "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" -t 2 "${flags[@]}" 2>"$tmp/err" \
      || fail "$arch: windows ($budget slots, chunk $chunk, $pass run) failed: $(cat "$tmp/err")"
    cmp -s "$res" "$tmp/ssd.bin" || fail "$arch: windows ($budget slots, chunk $chunk, $pass run): logits differ (seed $seed)"
    grep -q "^experts: $total windows of .* $budget device slots" "$tmp/err" || fail "$arch: no windows plan: $(cat "$tmp/err")"
    grep -q "^ds4: expert windows: [0-9]* lookups" "$tmp/err" || fail "$arch: no windows statistics: $(cat "$tmp/err")"
  done
  grep -q "moved the hottest experts of .* into device memory ([1-9]" "$tmp/err" || fail "$arch: no warm start: $(cat "$tmp/err")"
  if "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" -t 2 --ssd-streaming \
       --ssd-streaming-windows on --ssd-streaming-trace-out "$tmp/t.trace" 2>"$tmp/err"; then
    fail "$arch: a trace with windows was not refused"
  fi
  grep -q "ssd-streaming-trace-out records the expert cache's steps" "$tmp/err" || fail "$arch: unclear refusal: $(cat "$tmp/err")"

  # --simulate-used-memory NGB: the automatic budget is half of what is
  # available less N, less the reserve, and the plan shows both figures. The
  # whole RAM in GiB leaves less than the 2 GiB reserve: the cache shrinks
  # from every expert (the run above) to one; 1 GiB shrinks the figure by
  # exactly 1.00 GiB; a budget given as a count is unchanged. The logits stay
  # the resident run's.
  ram_gib=$(awk '/^MemTotal:/ {print int($2 / 1048576)}' /proc/meminfo)
  grep -q "cache $total experts (.*, automatic: half of [0-9.]* GiB available less 2.00 GiB)" "$tmp/auto-err" \
    || fail "$arch: the automatic plan without the flag: $(grep "^ssd-streaming: " "$tmp/auto-err")"
  res=$tmp/res-32.bin
  [[ -f $res ]] || "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$res" --prefill-chunk 32 -t 2 \
    2>/dev/null || fail "$arch: resident run failed"
  for sim in "${ram_gib}GB" 1GB "${ram_gib}GB $working"; do
    read -r size count <<<"$sim"
    flags=(--ssd-streaming --simulate-used-memory "$size")
    [[ -n $count ]] && flags+=(--ssd-streaming-cache-experts "$count")
    "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" --prefill-chunk 32 -t 2 "${flags[@]}" \
        2>"$tmp/err" || fail "$arch: --simulate-used-memory $sim failed: $(cat "$tmp/err")"
    cmp -s "$res" "$tmp/ssd.bin" || fail "$arch: --simulate-used-memory $sim: logits differ from the resident run (seed $seed)"
    plan=$(grep "^ssd-streaming: .* resident" "$tmp/err")
    if [[ -n $count ]]; then
      grep -q "cache $count experts (.*, as asked)" <<<"$plan" || fail "$arch: $sim: a counted budget changed: $plan"
    elif [[ $size == 1GB ]]; then
      fig=$(sed -n 's/.*automatic: half of \([0-9.]*\) GiB available (\([0-9.]*\) GiB less 1\.00 GiB --simulate-used-memory) less 2\.00 GiB.*/\1 \2/p' <<<"$plan")
      read -r left avail <<<"$fig"
      [[ -n $left && $(awk -v a="$avail" 'BEGIN {printf "%.2f", a - 1}') == "$left" ]] \
        || fail "$arch: 1GB simulated: the plan's figures are not 1.00 GiB apart: $plan"
    else
      grep -q "cache 1 experts (.*, automatic: half of [0-9.]* [MG]iB available ([0-9.]* GiB less ${ram_gib}\.00 GiB --simulate-used-memory) less 2\.00 GiB)" <<<"$plan" \
        || fail "$arch: $sim: the cache did not shrink to one expert: $plan"
      grep -q "the budget holds no whole expert" "$tmp/err" || fail "$arch: $sim: no warning: $(cat "$tmp/err")"
    fi
  done
  # ds4-bench takes the flag the same way.
  "$bin/ds4-bench" -m "$m" -t 2 --ctx-start 8 --ctx-max 8 --step-incr 1 --gen-tokens 2 --ssd-streaming \
      --simulate-used-memory "${ram_gib}GB" >/dev/null 2>"$tmp/err" || fail "$arch: ds4-bench with the flag: $(cat "$tmp/err")"
  grep -q "^ssd-streaming: .* cache 1 experts (.*${ram_gib}\.00 GiB --simulate-used-memory" "$tmp/err" \
    || fail "$arch: ds4-bench: no simulated plan: $(cat "$tmp/err")"

  # A failed read (the test hook fails the 5th) ends the run with one sentence
  # naming the file, exit 1, and no logits written.
  rm -f "$tmp/x.bin"
  if DS4_TEST_FAIL_READ=5 "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/x.bin" --ssd-streaming \
       --ssd-streaming-cache-experts "$per_token" --ssd-streaming-lookahead off 2>"$tmp/err"; then
    fail "$arch: a failed expert read did not fail the run"
  fi
  grep -q "^ds4: reading \(expert [0-9]* of \)\?'blk\.[0-9]*\.ffn_.*_exps\.weight' from $m failed: Input/output error" "$tmp/err" \
    || fail "$arch: unclear read failure: $(cat "$tmp/err")"
  [[ ! -e "$tmp/x.bin" ]] || fail "$arch: logits written after a failed read"
done
echo "ok: --ssd-streaming logits equal the resident run (seed $seed)"
