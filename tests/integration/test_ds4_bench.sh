#!/usr/bin/env bash
# ds4-bench end to end on a tiny Qwen3-MoE and a tiny DeepSeek V4 (q2): the
# CSV has a header and exactly one row per expected frontier (step-incr and
# step-mul), every number is positive, --csv writes the same shape, --layers
# slices the file in ds4's spelling (A:B both inclusive, N:output), and bad
# arguments are one line with exit 2 before any model is read.
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

source "$(dirname "$0")/seed.sh"  # seed (DS4_TEST_SEED), RANDOM seeded with it
"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/q.gguf" >/dev/null
"$bin/ds4-gguf" synth --arch deepseek4 --preset tiny --quant q2 --seed "$seed" --out "$tmp/d.gguf" >/dev/null

# check_csv FILE "EXPECTED CTX LIST": header, one row per frontier in order,
# four fields, positive rates and byte counts.
check_csv() {
  local file=$1 want=$2
  [[ $(head -1 "$file") == "ctx,prefill_tps,gen_tps,kv_bytes" ]] || fail "bad header in $file (seed $seed): $(head -1 "$file")"
  local got
  got=$(tail -n +2 "$file" | cut -d, -f1 | tr '\n' ' ' | sed 's/ $//')
  [[ "$got" == "$want" ]] || fail "frontiers '$got', expected '$want' (seed $seed)"
  awk -F, 'NR > 1 && (NF != 4 || !($2 > 0) || !($3 > 0) || !($4 > 0) || $4 != int($4)) { bad = 1; print "bad row: " $0 > "/dev/stderr" }
           END { exit bad }' "$file" || fail "non-positive or malformed row in $file (seed $seed)"
}

bench_seed=$RANDOM
for model in q d; do
  "$bin/ds4-bench" -m "$tmp/$model.gguf" -t 2 --ctx-start 8 --ctx-max 40 --step-incr 16 --gen-tokens 3 \
    --prefill-chunk 5 --seed "$bench_seed" >"$tmp/$model.csv" 2>"$tmp/err" \
    || fail "$model --step-incr run exited $? (seeds $seed/$bench_seed): $(cat "$tmp/err")"
  check_csv "$tmp/$model.csv" "8 24 40"
  grep -q "rows written" "$tmp/err" || fail "$model: no summary on stderr: $(cat "$tmp/err")"

  # ×1.5 rounded up: 3, 5 (4.5), 8 (7.5), 12, 18; 27 > 20.
  "$bin/ds4-bench" -m "$tmp/$model.gguf" -t 1 --ctx-start 3 --ctx-max 20 --step-mul 1.5 --gen-tokens 2 \
    --seed "$bench_seed" --csv "$tmp/$model.mul.csv" >"$tmp/stdout" 2>"$tmp/err" \
    || fail "$model --step-mul run exited $? (seeds $seed/$bench_seed): $(cat "$tmp/err")"
  [[ ! -s "$tmp/stdout" ]] || fail "$model: --csv run also wrote to stdout"
  check_csv "$tmp/$model.mul.csv" "3 5 8 12 18"
done

# The state of a plain KV cache grows with the context.
awk -F, 'NR > 1 { if (NR > 2 && !($4 > prev)) bad = 1; prev = $4 } END { exit bad }' "$tmp/q.csv" \
  || fail "qwen3moe kv_bytes do not grow with ctx: $(cat "$tmp/q.csv")"

# --layers on a file (tiny qwen3moe has 4 blocks, tiny deepseek4 5): 2:2 is one block,
# 1:output three; the output names the slice as given, and a slice reads
# fewer weights per token than the whole model.
weights() { sed -n 's/^weights per decoded token: \([0-9]*\) bytes.*/\1/p' "$1"; }
for model in q:4 d:5; do
  n_layer=${model#*:} model=${model%:*}
  "$bin/ds4-bench" -m "$tmp/$model.gguf" -t 2 --ctx-start 4 --ctx-max 4 --step-incr 1 --gen-tokens 2 \
    --seed "$bench_seed" >/dev/null 2>"$tmp/all.err" || fail "$model whole run exited $?: $(cat "$tmp/all.err")"
  grep -q "^weights per decoded token: .*, layers 0:$(( n_layer - 1 )): " "$tmp/all.err" \
    || fail "$model: whole model is not 0:$(( n_layer - 1 )): $(cat "$tmp/all.err")"
  for spec in 2:2 1:output; do
    "$bin/ds4-bench" -m "$tmp/$model.gguf" --layers "$spec" -t 2 --ctx-start 4 --ctx-max 4 --step-incr 1 --gen-tokens 2 \
      --seed "$bench_seed" --json "$tmp/$model.json" >"$tmp/$model.slice.csv" 2>"$tmp/slice.err" \
      || fail "$model --layers $spec exited $? (seeds $seed/$bench_seed): $(cat "$tmp/slice.err")"
    check_csv "$tmp/$model.slice.csv" "4"
    grep -q "^weights per decoded token: .*, layers $spec: " "$tmp/slice.err" || fail "$model --layers $spec: $(cat "$tmp/slice.err")"
    node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
             if (j.layers !== process.argv[2] || j.n_layer !== +process.argv[3] ||
                 j.prefill_products !== "cpu" || j.int8_activations !== false) { console.error(JSON.stringify(j)); process.exit(1); }' \
      "$tmp/$model.json" "$spec" "$n_layer" || fail "$model --layers $spec: --json layers is not '$spec' (or the products are not the CPU's)"
    (( $(weights "$tmp/slice.err") < $(weights "$tmp/all.err") )) || fail "$model --layers $spec reads no fewer weights than the whole model"
    rm -f "$tmp/$model.json"
  done
done

# Bad arguments: one line, exit 2, and never the model map line (nothing loaded).
# shellcheck source=tests/integration/ds4_bench_usage.sh
source "$(dirname "${BASH_SOURCE[0]}")/ds4_bench_usage.sh"
m=$tmp/q.gguf
expect_usage
expect_usage -m "$tmp/missing.gguf" --step-incr 1
expect_usage -m "$m" --ctx-start 8 --ctx-max 16
expect_usage -m "$m" --step-incr 4 --step-mul 2
expect_usage -m "$m" --step-mul 1
expect_usage -m "$m" --step-mul nan
expect_usage -m "$m" --step-mul -3
expect_usage -m "$m" --step-incr 0
expect_usage -m "$m" --step-incr 4x
expect_usage -m "$m" --step-incr 2.5
expect_usage -m "$m" --ctx-start 0 --step-incr 1
expect_usage -m "$m" --ctx-start 32 --ctx-max 16 --step-incr 1
expect_usage -m "$m" --ctx-max 99999999999 --step-incr 1
expect_usage -m "$m" --backend tpu --step-incr 1
expect_usage -m "$m" -t 0 --step-incr 1
expect_usage -m "$m" --gen-tokens 0 --step-incr 1
expect_usage -m "$m" --prefill-chunk -1 --step-incr 1
expect_usage -m "$m" --seed -1 --step-incr 1
expect_usage -m "$m" --synthetic deepseek4-flash-q2 --step-incr 1
expect_usage -m "$m" --exact --int8-activations --step-incr 1
grep -q "contradict" "$tmp/err" || fail "--exact --int8-activations: $(cat "$tmp/err")"
for spec in 0:9 0:4 4:output; do
  expect_usage -m "$m" --layers "$spec" --step-incr 1
  grep -q "4 layers" "$tmp/err" || fail "--layers $spec error does not name the layer count: $(cat "$tmp/err")"
done
expect_usage -m "$m" --layers 3:1 --step-incr 1
expect_usage -m "$m" --layers 1:out --step-incr 1
expect_usage -m "$m" --step-incr 1 --csv "$tmp/no/such/dir/out.csv"
expect_usage -m "$m" --step-incr 1 --bogus
expect_usage -m "$m" --step-incr 1 stray

# A file that is not a model: the loader's sentence, exit 1.
printf 'not a gguf' >"$tmp/bad.gguf"
set +e
"$bin/ds4-bench" -m "$tmp/bad.gguf" --ctx-start 4 --ctx-max 4 --step-incr 1 >/dev/null 2>"$tmp/err"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "non-GGUF model: expected exit 1, got $rc: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "non-GGUF model: expected one line: $(cat "$tmp/err")"

# --ssd-streaming: the same walk with the experts through a small cache; the
# cache's line at the end and in --json; the cache flag alone is a usage error.
"$bin/ds4-bench" -m "$m" --ctx-start 16 --ctx-max 16 --step-incr 1 --gen-tokens 4 --ssd-streaming \
    --ssd-streaming-cache-experts 4 --json "$tmp/ssd.json" >"$tmp/ssd.csv" 2>"$tmp/err" \
  || fail "--ssd-streaming walk failed: $(cat "$tmp/err")"
grep -q "^ds4-bench: experts: [0-9]* lookups, [0-9]* hits .* misses (.* GiB read in " "$tmp/err" || fail "no cache line: $(cat "$tmp/err")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["expert_cache"]; assert d["ssd_streaming"] and "misses" in d["expert_stats"] and c["lookups"] == c["hits"] + c["misses"] and c["bytes_read"] > 0, d' \
  "$tmp/ssd.json" || fail "no cache statistics in --json"
expect_usage -m "$m" --step-incr 1 --ssd-streaming-cache-experts 4
ram_gib=$(awk '/^MemTotal:/ {print int($2 / 1048576)}' /proc/meminfo)
for bad in -1GB 1.5 "$((ram_gib + 1))GB"; do
  expect_usage -m "$m" --step-incr 1 --ssd-streaming --simulate-used-memory "$bad"
  grep -q -- "--simulate-used-memory" "$tmp/err" || fail "--simulate-used-memory $bad: $(cat "$tmp/err")"
done
expect_usage -m "$m" --step-incr 1 --simulate-used-memory 1GB

# Into a variable first: `grep -q` stops reading at its match, and under
# pipefail the writer's SIGPIPE would fail the check at random.
help=$("$bin/ds4-bench" --help)
grep -q -- "--synthetic PRESET" <<<"$help" || fail "--help does not describe --synthetic"
grep -q -- "N:output" <<<"$help" || fail "--help does not describe --layers N:output"
grep -q -- "--exact" <<<"$help" || fail "--help does not describe --exact"
echo "ok (seeds $seed/$bench_seed)"
