#!/usr/bin/env bash
# --ssd-streaming-pack end to end: `ds4-gguf pack` leaves the model file as
# it was; ds4 --ssd-streaming reading missed experts from the pack gives the
# resident run's logits bit for bit (the CPU) for both families (weight
# types drawn each run), at budgets of one expert, half the working set and
# every expert, prefill chunks and read engines drawn each run, and a mixed
# run where whole blocks are read from the GGUF; the end-of-run line shows
# one read request per missed expert (three without the pack, same run
# otherwise). Refusals: a failed read (the test hook) and a damaged record
# fail the run with one sentence and exit 1, no logits written; a pack of
# another model, a cut-short pack, one that is no pack: exit 1 at load (the
# server does not start); a missing pack or one without --ssd-streaming:
# exit 2 before the model loads. ds4-bench takes the flag and reports the
# read requests in --json.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/seed.sh"  # seed (DS4_TEST_SEED), RANDOM seeded with it

ids() { python3 -c "import random,sys; r=random.Random($seed); print(' '.join(str(r.randrange($2)) for _ in range($1)))"; }
# "M misses (... ; R read requests)" of the end-of-run line -> "M R".
# misses_reads ERR: the run's misses and read requests, the misses less those
# the router lookahead had read already (copied, not read again).
misses_reads() {
  sed -n 's/^ds4: experts: .* \([0-9]*\) misses (0 from the host tier, .*; \([0-9]*\) read requests).*; [0-9]* read ahead, \([0-9]*\) of them used$/\1 \3 \2/p' "$1" |
    awk '{print $1 - $2, $3}'
}

for arch in qwen3moe deepseek4 glm-dsa; do
  m=$tmp/$arch.gguf p=$tmp/$arch.pack
  rm -f "$tmp"/res-*.bin
  case $arch in
    qwen3moe) types=("--type f32" "--type q8_0" "--type q4_k_m") ;;
    deepseek4) types=("--quant f32" "--quant q2" "--quant q4") ;;
    glm-dsa) types=("--type f32" "--type q8_0" "--quant q2") ;;  # q2: llama-quantize's Q2_K mix
  esac
  read -r type_flag type <<<"${types[RANDOM % 3]}"
  "$bin/ds4-gguf" synth --arch "$arch" --preset tiny --no-tokenizer --seed "$seed" $type_flag "$type" --out "$m" >/dev/null \
    || fail "$arch: synth $type_flag $type failed"
  cp "$m" "$tmp/before.gguf"
  "$bin/ds4-gguf" pack "$m" "$p" >"$tmp/out" || fail "$arch: pack failed"
  grep -q "^wrote $p: [0-9]* experts of $m" "$tmp/out" || fail "$arch: pack said: $(cat "$tmp/out")"
  cmp -s "$m" "$tmp/before.gguf" || fail "$arch: pack changed the model file"
  v=$("$bin/ds4-gguf" inspect "$m" | sed -n "s/^  $arch.vocab_size *u32 *\([0-9]*\)$/\1/p")
  n=$((150 + RANDOM % 150))
  ids "$n" "$v" >"$tmp/ids.txt"
  what0="$arch $type_flag $type (seed $seed)"

  "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/auto.bin" --ssd-streaming --ssd-streaming-pack "$p" \
      -t 2 2>"$tmp/err" || fail "$what0: the packed run failed: $(cat "$tmp/err")"
  plan=$(grep "^ssd-streaming: " "$tmp/err")
  total=$(sed -n 's/.*; \([0-9]*\) routed experts of .*/\1/p' <<<"$plan")
  per_token=$(sed -n 's/.*MoE blocks x \([0-9]*\)).*/\1/p' <<<"$plan")
  working=$(sed -n 's/.*working set \([0-9]*\) experts per token.*/\1/p' <<<"$plan")
  [[ -n "$total" && -n "$per_token" && -n "$working" ]] || fail "$what0: cannot read the plan: $plan"
  grep -q "^experts: cache of .* read from the expert pack $p, one read per expert, on a miss" "$tmp/err" \
    || fail "$what0: the cache line does not name the pack: $(cat "$tmp/err")"
  engines=(auto pread)
  half=$(( working / 2 > 1 ? working / 2 : 1 ))
  chunks=(1 32 600)
  # Per expert, so every miss goes through the pack (the chunk shrinks to
  # what the cache takes; the resident run uses the same chunk).
  for budget in 1 "$half" "$total"; do
    chunk=${chunks[RANDOM % 3]}
    io=${engines[RANDOM % 2]}
    capacity=$(( budget < total ? budget + per_token : total ))
    eff=$(( chunk < capacity / per_token ? chunk : capacity / per_token ))
    res=$tmp/res-$eff.bin
    [[ -f $res ]] || "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$res" --prefill-chunk "$eff" -t 2 \
      2>/dev/null || fail "$what0: resident run failed"
    what="$what0, budget $budget, chunk $chunk, io $io"
    ahead=$( (( RANDOM % 2 )) && echo on || echo off)  # the router lookahead reads records too
    what="$what, lookahead $ahead"
    flags=(--ssd-streaming --ssd-streaming-cache-experts "$budget" --ssd-streaming-prefill per-expert --ssd-streaming-io "$io"
           --ssd-streaming-lookahead "$ahead")
    "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" --prefill-chunk "$chunk" -t 2 \
        "${flags[@]}" --ssd-streaming-pack "$p" 2>"$tmp/err" || fail "$what: failed: $(cat "$tmp/err")"
    cmp -s "$res" "$tmp/ssd.bin" || fail "$what: logits differ from the resident run"
    read -r misses reads <<<"$(misses_reads "$tmp/err")"
    [[ -n "$misses" && $misses -gt 0 ]] || fail "$what: no misses counted: $(grep '^ds4: experts' "$tmp/err")"
    [[ $reads == "$misses" ]] || fail "$what: $reads read requests for $misses misses, not one each"
    # The same run from the GGUF: three requests per miss.
    "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/gguf.bin" --prefill-chunk "$chunk" -t 2 \
        "${flags[@]}" 2>"$tmp/err" || fail "$what: the unpacked run failed"
    read -r misses_g reads_g <<<"$(misses_reads "$tmp/err")"
    [[ $misses_g == "$misses" && $reads_g == $((3 * misses)) ]] \
      || fail "$what: unpacked $misses_g misses in $reads_g requests, packed $misses in $reads"
  done
  # Automatic prefill at a long chunk: whole blocks from the GGUF, single
  # experts from the pack, in one run.
  res=$tmp/res-600.bin
  [[ -f $res ]] || "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$res" --prefill-chunk 600 -t 2 2>/dev/null
  "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ssd.bin" --prefill-chunk 600 -t 2 --ssd-streaming \
      --ssd-streaming-cache-experts "$half" --ssd-streaming-prefill auto --ssd-streaming-pack "$p" 2>"$tmp/err" \
    || fail "$what0: automatic prefill failed: $(cat "$tmp/err")"
  cmp -s "$res" "$tmp/ssd.bin" || fail "$what0: automatic prefill with the pack: logits differ"
  grep -q " [1-9][0-9]* full-layer reads" "$tmp/err" || fail "$what0: no full-layer read at chunk 600: $(cat "$tmp/err")"

  # A failed read through the pack (per expert: every read is the pack's):
  # one sentence, exit 1, no logits.
  rm -f "$tmp/x.bin"
  if DS4_TEST_FAIL_READ=3 "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/x.bin" --ssd-streaming \
       --ssd-streaming-cache-experts 1 --ssd-streaming-prefill per-expert --ssd-streaming-pack "$p" \
       --ssd-streaming-lookahead off 2>"$tmp/err"; then
    fail "$what0: a failed pack read did not fail the run"
  fi
  grep -q "^ds4: reading expert [0-9]* of block [0-9]* from $p failed: Input/output error" "$tmp/err" \
    || fail "$what0: unclear read failure: $(cat "$tmp/err")"
  [[ ! -e "$tmp/x.bin" ]] || fail "$what0: logits written after a failed read"

  # Damaged records (the first half of them): the header still matches, the
  # read that brings one in fails.
  cp "$p" "$tmp/bad.pack"
  python3 - "$tmp/bad.pack" "$seed" <<'PY'
import random, struct, sys
path, seed = sys.argv[1], int(sys.argv[2])
b = bytearray(open(path, "rb").read())
header = struct.unpack_from("<Q", b, 16)[0]  # magic, version, flags, then the header size
r = random.Random(seed)
for i in range(header, header + (len(b) - header) // 2, 4096):
    b[i + r.randrange(4096)] ^= 1 + r.randrange(255)
open(path, "wb").write(b)
PY
  if "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/x.bin" --ssd-streaming \
       --ssd-streaming-cache-experts "$total" --ssd-streaming-prefill per-expert --ssd-streaming-pack "$tmp/bad.pack" \
       2>"$tmp/err"; then
    fail "$what0: a damaged pack gave logits"
  fi
  grep -q "^ds4: reading expert [0-9]* of block [0-9]* from $tmp/bad.pack failed: the record does not match its checksum" \
    "$tmp/err" || fail "$what0: unclear damage: $(cat "$tmp/err")"
  [[ ! -e "$tmp/x.bin" ]] || fail "$what0: logits written from a damaged pack"

  # Refused at load, exit 1, one line: cut short, no pack at all, another model's.
  head -c $(( $(stat -c %s "$p") - 1 - RANDOM % 4000 )) "$p" >"$tmp/cut.pack"
  refusals=("$tmp/cut.pack:is cut short" "$m:is not an expert pack")
  other=$tmp/$([[ $arch == qwen3moe ]] && echo deepseek4 || echo qwen3moe).pack
  [[ -f $other ]] && refusals+=("$other:was made from another model file")
  for r in "${refusals[@]}"; do
    file=${r%%:*} why=${r#*:}
    rc=0
    "$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/x.bin" --ssd-streaming \
        --ssd-streaming-pack "$file" 2>"$tmp/err" || rc=$?
    [[ $rc == 1 ]] || fail "$what0: $file: exit $rc, not 1: $(cat "$tmp/err")"
    grep -q "^ds4: the expert pack $file $why" "$tmp/err" || fail "$what0: $file: not '$why': $(cat "$tmp/err")"
  done
  if [[ -f $other ]]; then
    rc=0
    timeout 60 "$bin/ds4-server" -m "$m" --backend cpu -t 2 --port $((20000 + RANDOM % 20000)) --ssd-streaming \
        --ssd-streaming-pack "$other" >"$tmp/log" 2>&1 || rc=$?
    [[ $rc == 1 ]] || fail "$what0: ds4-server with another model's pack: exit $rc, not 1: $(tail -3 "$tmp/log")"
    grep -q "the expert pack $other was made from another model file" "$tmp/log" || fail "ds4-server: $(tail -3 "$tmp/log")"
  fi

  # ds4-bench takes the flag; its JSON counts the read requests.
  "$bin/ds4-bench" -m "$m" -t 2 --ctx-start 8 --ctx-max 8 --step-incr 1 --gen-tokens 3 --ssd-streaming \
      --ssd-streaming-cache-experts 1 --ssd-streaming-pack "$p" --ssd-streaming-lookahead on --json "$tmp/bench.json" >/dev/null 2>"$tmp/err" \
    || fail "$what0: ds4-bench with the pack failed: $(cat "$tmp/err")"
  python3 - "$tmp/bench.json" <<'PY' || fail "$what0: ds4-bench's JSON does not count one request per miss"
import json, sys
c = json.load(open(sys.argv[1]))["expert_cache"]
# Misses the router lookahead had read already are copied, not read again.
assert c["misses"] > 0 and c["miss_reads"] == c["misses"] - c["host_hits"] - c["lookahead_hits"], c
PY
done

# Exit 2 before any model is loaded.
for args in "--ssd-streaming --ssd-streaming-pack $tmp/none.pack" "--ssd-streaming-pack $tmp/qwen3moe.pack" \
            "--ssd-streaming --ssd-streaming-pack $tmp"; do
  rc=0
  # shellcheck disable=SC2086
  "$bin/ds4" -m "$tmp/absent.gguf" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/x.bin" $args 2>"$tmp/err" || rc=$?
  [[ $rc == 2 && $(wc -l <"$tmp/err") == 1 ]] || fail "'$args': exit $rc: $(cat "$tmp/err")"
  grep -q -- "--ssd-streaming-pack" "$tmp/err" || fail "'$args': $(cat "$tmp/err")"
done
echo "ok: --ssd-streaming-pack logits equal the resident run, one read per missed expert (seed $seed)"
