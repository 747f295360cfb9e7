#!/usr/bin/env bash
# ds4-bench --synthetic: a tiny model built in memory runs the frontier walk
# (CSV shape as with -m), prints the build line and the weights-per-token
# line, writes --json, honours --layers; bad presets and flag combinations
# are one line with exit 2 before anything is built.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
seed=$RANDOM

"$bin/ds4-bench" --synthetic qwen3moe-tiny-f32 --ctx-start 8 --ctx-max 16 --step-mul 2 -t 2 --gen-tokens 3 \
  --seed "$seed" --json "$tmp/out.json" >"$tmp/out.csv" 2>"$tmp/err" || fail "run exited $? (seed $seed): $(cat "$tmp/err")"
[[ $(head -1 "$tmp/out.csv") == "ctx,prefill_tps,gen_tps,kv_bytes" ]] || fail "bad header: $(head -1 "$tmp/out.csv")"
[[ $(tail -n +2 "$tmp/out.csv" | cut -d, -f1 | tr '\n' ' ') == "8 16 " ]] || fail "frontiers: $(cat "$tmp/out.csv")"
awk -F, 'NR > 1 && (NF != 4 || !($2 > 0) || !($3 > 0) || !($4 > 0)) { bad = 1 } END { exit bad }' "$tmp/out.csv" \
  || fail "non-positive row (seed $seed): $(cat "$tmp/out.csv")"
grep -q "^ds4-bench: synthetic qwen3moe-tiny-f32, layers 0:4 of 4, [0-9]* bytes" "$tmp/err" || fail "no build line: $(cat "$tmp/err")"
grep -q "^weights per decoded token: [0-9]* bytes" "$tmp/err" || fail "no weights line: $(cat "$tmp/err")"
node -e '
  const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  if (j.model !== "qwen3moe-tiny-f32" || j.layers !== "0:4" || !(j.weights_bytes_per_token > 0) || j.rows.length !== 2 ||
      j.rows[0].ctx !== 8 || j.rows[1].ctx !== 16 || !(j.rows[1].gen_tps > 0)) { console.error(JSON.stringify(j)); process.exit(1); }
' "$tmp/out.json" || fail "bad --json output (seed $seed)"

# A slice: fewer weights per token than the whole model, the same rows.
"$bin/ds4-bench" --synthetic qwen3moe-tiny-f32 --layers 1:3 --ctx-start 4 --ctx-max 4 --step-incr 1 -t 2 --gen-tokens 2 \
  --seed "$seed" >"$tmp/slice.csv" 2>"$tmp/err2" || fail "--layers 1:3 exited $? (seed $seed): $(cat "$tmp/err2")"
grep -q "layers 1:3 of 4" "$tmp/err2" || fail "slice build line: $(cat "$tmp/err2")"
whole=$(sed -n 's/^weights per decoded token: \([0-9]*\) bytes.*/\1/p' "$tmp/err")
part=$(sed -n 's/^weights per decoded token: \([0-9]*\) bytes.*/\1/p' "$tmp/err2")
(( part < whole )) || fail "slice reads $part bytes per token, the whole model $whole"

expect_usage() {
  set +e
  "$bin/ds4-bench" "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "ds4-bench $*: expected exit 2, got $rc: $(cat "$tmp/err")"
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "ds4-bench $*: expected one line, got: $(cat "$tmp/err")"
  grep -q "^ds4-bench: " "$tmp/err" || fail "ds4-bench $*: message lacks the program name: $(cat "$tmp/err")"
}
expect_usage --synthetic no-such-preset --step-incr 1
grep -q "deepseek4-flash-q2" "$tmp/err" || fail "unknown preset does not list the valid ones: $(cat "$tmp/err")"
printf 'GGUF' >"$tmp/x.gguf"
expect_usage -m "$tmp/x.gguf" --synthetic qwen3moe-tiny-f32 --step-incr 1
expect_usage --synthetic qwen3moe-tiny-f32 --layers 0:5 --step-incr 1
grep -q "4 layers" "$tmp/err" || fail "--layers error does not name the layer count: $(cat "$tmp/err")"
expect_usage --synthetic deepseek4-flash-q2 --layers 0:44 --step-incr 1
expect_usage --synthetic qwen3moe-tiny-f32 --layers 3:1 --step-incr 1
expect_usage --synthetic qwen3moe-tiny-f32 --layers x --step-incr 1
expect_usage --synthetic qwen3moe-tiny-f32 --step-incr 1 --json "$tmp/no/such/dir/out.json"
expect_usage --step-incr 1
echo "ok (seed $seed)"
