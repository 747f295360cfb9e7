#!/usr/bin/env bash
# ds4-bench --synthetic: a tiny model built in memory runs the frontier walk
# (CSV shape as with -m), prints the build line and the weights-per-token
# line, writes --json, honours --layers (ds4's spelling: A:B both inclusive,
# or N:output); bad presets and flag combinations
# are one line with exit 2 before anything is built.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/seed.sh"  # seed (DS4_TEST_SEED), RANDOM seeded with it

"$bin/ds4-bench" --synthetic qwen3moe-tiny-f32 --ctx-start 8 --ctx-max 16 --step-mul 2 -t 2 --gen-tokens 3 \
  --seed "$seed" --json "$tmp/out.json" >"$tmp/out.csv" 2>"$tmp/err" || fail "run exited $? (seed $seed): $(cat "$tmp/err")"
[[ $(head -1 "$tmp/out.csv") == "ctx,prefill_tps,gen_tps,kv_bytes" ]] || fail "bad header: $(head -1 "$tmp/out.csv")"
[[ $(tail -n +2 "$tmp/out.csv" | cut -d, -f1 | tr '\n' ' ') == "8 16 " ]] || fail "frontiers: $(cat "$tmp/out.csv")"
awk -F, 'NR > 1 && (NF != 4 || !($2 > 0) || !($3 > 0) || !($4 > 0)) { bad = 1 } END { exit bad }' "$tmp/out.csv" \
  || fail "non-positive row (seed $seed): $(cat "$tmp/out.csv")"
grep -q "^ds4-bench: synthetic qwen3moe-tiny-f32, layers 0:3 of 4, [0-9]* bytes" "$tmp/err" || fail "no build line: $(cat "$tmp/err")"
grep -q "^weights per decoded token: [0-9]* bytes" "$tmp/err" || fail "no weights line: $(cat "$tmp/err")"
node -e '
  const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  if (j.model !== "qwen3moe-tiny-f32" || j.layers !== "0:3" || !(j.weights_bytes_per_token > 0) || j.rows.length !== 2 ||
      j.rows[0].ctx !== 8 || j.rows[1].ctx !== 16 || !(j.rows[1].gen_tps > 0)) { console.error(JSON.stringify(j)); process.exit(1); }
' "$tmp/out.json" || fail "bad --json output (seed $seed)"

# Slices: every block of the model reads the same bytes per token (the
# synthetic blocks are alike), so with the embedding row and the head fixed,
# 1:2 (two blocks), 1:output (three) and 2:2 (one) read whole - 2, whole - 1
# and whole - 3 blocks' worth.
weights() { sed -n 's/^weights per decoded token: \([0-9]*\) bytes.*/\1/p' "$1"; }
slice() {  # slice SPEC: runs it, checks the build line and the --json spelling
  "$bin/ds4-bench" --synthetic qwen3moe-tiny-f32 --layers "$1" --ctx-start 4 --ctx-max 4 --step-incr 1 -t 2 \
    --gen-tokens 2 --seed "$seed" --json "$tmp/$2.json" >"$tmp/$2.csv" 2>"$tmp/$2.err" \
    || fail "--layers $1 exited $? (seed $seed): $(cat "$tmp/$2.err")"
  grep -q "^ds4-bench: synthetic qwen3moe-tiny-f32, layers $1 of 4, " "$tmp/$2.err" \
    || fail "--layers $1 build line: $(cat "$tmp/$2.err")"
  grep -q "^weights per decoded token: .*, layers $1: " "$tmp/$2.err" || fail "--layers $1 weights line: $(cat "$tmp/$2.err")"
  node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
           if (j.layers !== process.argv[2] || j.n_layer !== 4) { console.error(JSON.stringify(j)); process.exit(1); }' \
    "$tmp/$2.json" "$1" || fail "--layers $1: --json layers is not '$1'"
  [[ $(wc -l <"$tmp/$2.csv") -eq 2 ]] || fail "--layers $1: expected one row: $(cat "$tmp/$2.csv")"
}
slice 1:2 two
slice 1:output three
slice 2:2 one
whole=$(weights "$tmp/err")
two=$(weights "$tmp/two.err")
three=$(weights "$tmp/three.err")
one=$(weights "$tmp/one.err")
block=$(( three - two ))
(( block > 0 )) || fail "1:output ($three bytes per token) does not read more than 1:2 ($two)"
(( two - one == block && whole - three == block )) \
  || fail "bytes per token not one block apart: 2:2 $one, 1:2 $two, 1:output $three, all $whole (seed $seed)"

# shellcheck source=tests/integration/ds4_bench_usage.sh
source "$(dirname "${BASH_SOURCE[0]}")/ds4_bench_usage.sh"
expect_usage --synthetic no-such-preset --step-incr 1
grep -q "deepseek4-flash-q2" "$tmp/err" || fail "unknown preset does not list the valid ones: $(cat "$tmp/err")"
printf 'GGUF' >"$tmp/x.gguf"
expect_usage -m "$tmp/x.gguf" --synthetic qwen3moe-tiny-f32 --step-incr 1
# Outside the model (before anything is built, even for a 43-layer preset):
# the sentence names the layer count. 0:4 was all of a 4-layer model when
# --layers was half-open; now it is one block too many.
for spec in 0:4 0:9 4:4 4:output; do
  expect_usage --synthetic qwen3moe-tiny-f32 --layers "$spec" --step-incr 1
  grep -q "4 layers" "$tmp/err" || fail "--layers $spec error does not name the layer count: $(cat "$tmp/err")"
done
expect_usage --synthetic deepseek4-flash-q2 --layers 0:43 --step-incr 1
grep -q "43 layers" "$tmp/err" || fail "--layers 0:43 error does not name the layer count: $(cat "$tmp/err")"
for spec in 3:1 x 1: :2 1:out -1:2 1:2:3; do
  expect_usage --synthetic qwen3moe-tiny-f32 --layers "$spec" --step-incr 1
done
expect_usage --synthetic qwen3moe-tiny-f32 --step-incr 1 --json "$tmp/no/such/dir/out.json"
for n in 0 -1 x 1025; do expect_usage --synthetic qwen3moe-tiny-f32 --step-incr 1 --parallel "$n"; done

# --parallel N: N sequences per forward pass; the rates count all of them,
# gen_tps_per_seq one, and the state holds N sequences.
n=$(( 2 + RANDOM % 4 ))
"$bin/ds4-bench" --synthetic qwen3moe-tiny-f32 --ctx-start 8 --ctx-max 16 --step-mul 2 -t 2 --gen-tokens 3 \
  --seed "$seed" --parallel "$n" --json "$tmp/par.json" >"$tmp/par.csv" 2>"$tmp/par.err" \
  || fail "--parallel $n exited $? (seed $seed): $(cat "$tmp/par.err")"
[[ $(head -1 "$tmp/par.csv") == "ctx,prefill_tps,gen_tps,kv_bytes,parallel,gen_tps_per_seq" ]] \
  || fail "--parallel header: $(head -1 "$tmp/par.csv")"
awk -F, -v n="$n" 'NR > 1 && (NF != 6 || $5 != n || !($6 > 0) || ($3 / $6) < n * 0.99 || ($3 / $6) > n * 1.01) { bad = 1 } END { exit bad }' \
  "$tmp/par.csv" || fail "--parallel $n rows: $(cat "$tmp/par.csv")"
one=$(awk -F, 'NR == 2 { print $4 }' "$tmp/out.csv"); many=$(awk -F, 'NR == 2 { print $4 }' "$tmp/par.csv")
[[ $many -eq $(( one * n )) ]] || fail "--parallel $n state is $many bytes, not $n x $one"
grep -q "$n sequences per batch" "$tmp/par.err" || fail "--parallel $n: no line naming the batch: $(cat "$tmp/par.err")"
node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  if (j.parallel !== +process.argv[2] || !(j.rows[0].gen_tps_per_seq > 0)) process.exit(1);' "$tmp/par.json" "$n" \
  || fail "--parallel $n --json lacks parallel / gen_tps_per_seq"
expect_usage --step-incr 1

# --n-layer N: the preset truncated as ds4-gguf synth --n-layer writes it
# (glm-dsa keeps its MTP block after the N trunk blocks, built but not run:
# the engine's n_layer counts the trunk).
"$bin/ds4-bench" --synthetic glm-dsa-tiny-f32 --n-layer 2 --ctx-start 4 --ctx-max 4 --step-incr 1 -t 2 \
  --gen-tokens 2 --seed "$seed" --json "$tmp/trunc.json" >"$tmp/trunc.csv" 2>"$tmp/trunc.err" \
  || fail "--n-layer 2 exited $? (seed $seed): $(cat "$tmp/trunc.err")"
grep -q "^ds4-bench: synthetic glm-dsa-tiny-f32 --n-layer 2, layers 0:2 of 3, " "$tmp/trunc.err" \
  || fail "--n-layer 2 build line: $(cat "$tmp/trunc.err")"
node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  if (j.n_layer !== 2 || j.synthetic_n_layer !== 2) { console.error(JSON.stringify(j)); process.exit(1); }' \
  "$tmp/trunc.json" || fail "--n-layer 2: --json lacks n_layer 2 / synthetic_n_layer 2"
for n in 0 5 x; do expect_usage --synthetic glm-dsa-tiny-f32 --n-layer "$n" --step-incr 1; done
expect_usage -m "$tmp/x.gguf" --n-layer 2 --step-incr 1
expect_usage --synthetic glm5-q2 --n-layer 2 --layers 0:3 --step-incr 1
grep -q "3 layers" "$tmp/err" || fail "--layers 0:3 of glm5-q2 --n-layer 2 does not name 3 layers: $(cat "$tmp/err")"
echo "ok (seed $seed)"
