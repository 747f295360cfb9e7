#!/usr/bin/env bash
# bench/vs-llama.sh without a GPU: shellcheck-clean scripts, --help, one-line argument errors (exit 2) and
# missing pieces (exit 1); the table printer fed with canned llama-bench / ds4-bench / bandwidth JSON drawn
# fresh each run, every ratio and roofline cell checked against arithmetic done here; the touched-bytes
# estimate on a GGUF written here tensor by tensor (its sizes from the ggml block layout, computed here);
# and a dry run of the whole script on a tiny model (CPU ds4, a stand-in llama-bench printing canned JSON).
# shellcheck disable=SC2015  # "A && B || fail": fail is wanted whenever the checks before it do not all pass
set -euo pipefail
src=${DS4_SOURCE_DIR:?}
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
vs=$src/bench/vs-llama.sh
table=$src/bench/vs_llama_table.py
seed=$RANDOM$RANDOM
echo "seed $seed"

# ---- shellcheck, --help --------------------------------------------------------------------------------------
if command -v shellcheck >/dev/null; then
    shellcheck "$vs" "$src/bench/device-pack.sh" "$0" || fail "shellcheck reports the scripts above"
fi
bash "$vs" --help > "$tmp/help" || fail "--help exited $?"
grep -q -- "--models" "$tmp/help" && grep -q "LLAMA_BUILD_DIR" "$tmp/help" || fail "--help lacks the options: $(cat "$tmp/help")"
# Into variables first: `grep -q` stops at its match, and under pipefail the writer's SIGPIPE would fail at random.
pack_help=$(bash "$src/bench/device-pack.sh" --help); table_help=$(python3 "$table" --help)
grep -q "llama-src.tar.xz" <<<"$pack_help" || fail "device-pack.sh --help"
grep -q "touched-bytes" <<<"$table_help" || fail "vs_llama_table.py --help"

# ---- argument errors: exit 2, one line naming the problem, before anything runs -------------------------------
expect_usage() {  # expect_usage WORD ARGS...
    local word=$1 rc=0
    shift
    bash "$vs" "$@" > "$tmp/out" 2> "$tmp/err" || rc=$?
    [ $rc -eq 2 ] || fail "vs-llama.sh $* exited $rc, expected 2: $(cat "$tmp/err")"
    [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "vs-llama.sh $*: not one line: $(cat "$tmp/err")"
    grep -q -- "$word" "$tmp/err" || fail "vs-llama.sh $*: '$word' not in: $(cat "$tmp/err")"
}
expect_usage "bogus" --bogus
expect_usage "gpt2" --models qwen3,gpt2
expect_usage "--models" --models ""
expect_usage "q3_k" --qwen-type q3_k
expect_usage "--reps" --reps 0
expect_usage "--reps" --reps x
expect_usage "--dsv4-layers" --dsv4-layers -4
expect_usage "ratio-128" --dsv4-layers 3
expect_usage "4..43" --dsv4-layers 44
expect_usage "4..78" --glm5-layers 3
expect_usage "4..78" --glm5-layers 79
expect_usage "--deadline" --deadline 5
expect_usage "nothing to run" --skip-ds4 --skip-llama
expect_usage "needs a value" --work
rc=0
bash "$src/bench/device-pack.sh" a b 2> "$tmp/err" || rc=$?
[ $rc -eq 2 ] || fail "device-pack.sh with two arguments exited $rc"

# A missing piece: one line, exit 1.
rc=0
OUT=$tmp/o1 bash "$vs" --ds4-bin "$tmp/nowhere" > /dev/null 2> "$tmp/err" || rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "ds4-gguf is missing" "$tmp/err" \
    || fail "missing ds4-gguf: rc $rc, $(cat "$tmp/err")"

# ---- the table printer on canned inputs ---------------------------------------------------------------------
# Fresh numbers each run; the expected cells are computed here from the same numbers, not by the printer.
python3 - "$tmp" "$seed" <<'EOF'
import json, random, sys
d, seed = sys.argv[1], int(sys.argv[2])
r = random.Random(seed)
v = {k: round(r.uniform(lo, hi), 2) for k, lo, hi in [
    ("l512", 1000, 20000), ("l4096", 1000, 20000), ("ltg0", 50, 400), ("ltg512", 50, 400),
    ("d512", 100, 5000), ("d4096", 100, 5000), ("dtg512", 5, 300), ("dtg4096", 5, 300),
    ("bw", 2000, 5000)]}
v["wbpt"] = r.randrange(10**9, 5 * 10**9)
def t(p, g, dep, ts):
    return {"build_commit": "abc1234", "n_prompt": p, "n_gen": g, "n_depth": dep, "avg_ts": ts,
            "stddev_ts": 1.5, "flash_attn": 1, "model_type": "qwen3moe 30B.A3B Q8_0"}
json.dump([t(512, 0, 0, v["l512"]), t(4096, 0, 0, v["l4096"]), t(0, 128, 0, v["ltg0"]),
           t(512, 0, 512, 1.0), t(4096, 0, 512, 1.0), t(0, 128, 512, v["ltg512"])], open(f"{d}/llama.json", "w"))
json.dump({"model": "m.gguf", "layers": 48, "weights_bytes_per_token": v["wbpt"],
           "rows": [{"ctx": 512, "prefill_tps": v["d512"], "gen_tps": v["dtg512"], "kv_bytes": 1},
                    {"ctx": 4096, "prefill_tps": v["d4096"], "gen_tps": v["dtg4096"], "kv_bytes": 2}]},
          open(f"{d}/ds4.json", "w"))
with open(f"{d}/ds4.csv", "w") as f:
    f.write(f"ctx,prefill_tps,gen_tps,kv_bytes\n512,{v['d512']},{v['dtg512']},1\n4096,{v['d4096']},{v['dtg4096']},2\n")
json.dump({"device": "test", "read_gbps": v["bw"]}, open(f"{d}/bw.json", "w"))
json.dump({"weights_bytes_per_token": 7 * 10**8}, open(f"{d}/touched.json", "w"))
json.dump(v, open(f"{d}/values.json", "w"))
EOF
python3 "$table" table --bandwidth "$tmp/bw.json" --case "M A" "$tmp/llama.json" "$tmp/ds4.json" \
    --case "M B" "$tmp/llama.json" "$tmp/ds4.csv" --touched "M B" "$tmp/touched.json" --md "$tmp/t.md" \
    > "$tmp/t.out" 2> "$tmp/err" || fail "table exited $? (seed $seed): $(cat "$tmp/err")"
cmp -s "$tmp/t.out" "$tmp/t.md" || fail "--md differs from stdout"
# cell MODEL TEST COLUMN (1-based among: llama, ds4, ratio, llama roof, ds4 roof)
cell() { awk -F' \\| ' -v m="| $1" -v t="$2" -v c="$3" '$1 == m && $2 == t { print $(2 + c) }' "$tmp/t.out" | sed 's/ |$//'; }
val() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$tmp/values.json" "$1"; }
check() {  # check MODEL TEST COL EXPECTED
    local got
    got=$(cell "$1" "$2" "$3")
    [ "$got" = "$4" ] || fail "table cell [$1, $2, col $3] is '$got', expected '$4' (seed $seed); table:
$(cat "$tmp/t.out")"
}
bw=$(val bw) wbpt=$(val wbpt)
for m in "M A" "M B"; do
    w=$wbpt
    [ "$m" = "M A" ] || w=700000000  # the CSV carries no bytes: the --touched estimate is used
    check "$m" pp512 1 "$(printf '%.2f' "$(val l512)")"
    check "$m" pp512 2 "$(printf '%.2f' "$(val d512)")"
    check "$m" pp512 3 "$(awk -v a="$(val d512)" -v b="$(val l512)" 'BEGIN { printf "%.2f×", a / b }')"
    check "$m" pp512 4 "—"
    check "$m" pp4096 3 "$(awk -v a="$(val d4096)" -v b="$(val l4096)" 'BEGIN { printf "%.2f×", a / b }')"
    check "$m" "tg128 @ d512" 1 "$(printf '%.2f' "$(val ltg512)")"
    check "$m" "tg128 @ d512" 2 "$(printf '%.2f' "$(val dtg512)")"
    check "$m" "tg128 @ d512" 3 "$(awk -v a="$(val dtg512)" -v b="$(val ltg512)" 'BEGIN { printf "%.2f×", a / b }')"
    roof() { awk -v t="$1" -v w="$w" -v bw="$bw" 'BEGIN { f = t * w / (bw * 1e9); printf (f >= 0.01 ? "%.1f %%" : "%.3f %%"), 100 * f }'; }
    check "$m" "tg128 @ d512" 4 "$(roof "$(val ltg512)")"
    check "$m" "tg128 @ d512" 5 "$(roof "$(val dtg512)")"
    check "$m" tg128 1 "$(printf '%.2f' "$(val ltg0)")"
    check "$m" tg128 2 "—"
    check "$m" tg128 4 "$(roof "$(val ltg0)")"
done
grep -q "from GGUF tensor table" "$tmp/t.out" && grep -q "M A: .* from ds4-bench" "$tmp/t.out" \
    || fail "the table does not say where the weight bytes came from: $(cat "$tmp/t.out")"

# A missing side is a dash, not an error.
python3 "$table" table --bandwidth "$tmp/bw.json" --case X - "$tmp/ds4.json" > "$tmp/t2.out" \
    || fail "table with no llama.cpp side exited $?"
grep -q "^| X | pp512 | — | $(printf '%.2f' "$(val d512)") | — |" "$tmp/t2.out" || fail "no-llama row: $(cat "$tmp/t2.out")"

# Bad inputs: one line, exit 1 (unreadable) or 2 (command line).
expect_table() {  # expect_table RC WORD ARGS...
    local want=$1 word=$2 rc=0
    shift 2
    python3 "$table" "$@" > /dev/null 2> "$tmp/err" || rc=$?
    [ $rc -eq "$want" ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q -- "$word" "$tmp/err" \
        || fail "vs_llama_table.py $*: rc $rc (want $want), stderr: $(cat "$tmp/err")"
}
echo "not json" > "$tmp/bad.json"
echo '{"rows": []}' > "$tmp/norows.json"
expect_table 1 "not JSON" table --bandwidth "$tmp/bad.json" --case X - -
expect_table 1 "not JSON" table --bandwidth "$tmp/bw.json" --case X "$tmp/bad.json" -
expect_table 1 "JSON list" table --bandwidth "$tmp/bw.json" --case X "$tmp/ds4.json" -
expect_table 1 "no rows" table --bandwidth "$tmp/bw.json" --case X - "$tmp/norows.json"
expect_table 1 "cannot read" table --bandwidth "$tmp/none.json" --case X - -
expect_table 1 "read_gbps" table --bandwidth "$tmp/ds4.json" --case X - -
expect_table 2 "required" table --case X - -
expect_table 2 "command" 
expect_table 1 "not a GGUF" touched-bytes "$tmp/bad.json"

# ---- touched-bytes on a GGUF written here ----------------------------------------------------------------------
# Tensors: token_embd f32 [64, 100], output q8_0 [64, 100], blk.0.attn_q q8_0 [64, 64], blk.0.ffn_gate_exps
# q8_0 [64, 32, 16] with 16 experts and 4 used, a norm f32 [64]. Block layout of ggml: q8_0 = 34 bytes per 32.
python3 - "$tmp" <<'EOF'
import struct, sys
d = sys.argv[1]
def s(x): b = x.encode(); return struct.pack("<Q", len(b)) + b
kv = [("general.architecture", 8, s("qwen3moe")), ("qwen3moe.expert_count", 4, struct.pack("<I", 16)),
      ("qwen3moe.expert_used_count", 4, struct.pack("<I", 4)),
      ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 1, 2, 3)),
      ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 2) + s("a") + s("b"))]
tensors = [("token_embd.weight", [64, 100], 0), ("output.weight", [64, 100], 8), ("blk.0.attn_q.weight", [64, 64], 8),
           ("blk.0.ffn_gate_exps.weight", [64, 32, 16], 8), ("blk.0.attn_norm.weight", [64], 0)]
def header(kv, tensors):  # a GGUF v3 header: key-values, then the tensor table (offsets 0)
    h = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, t, v in kv:
        h += s(k) + struct.pack("<I", t) + v
    for name, dims, t in tensors:
        h += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", x) for x in dims) + struct.pack("<IQ", t, 0)
    return h
h = header(kv, tensors)
open(f"{d}/t.gguf", "wb").write(h)
open(f"{d}/t-trunc.gguf", "wb").write(h[: len(h) - 20])
# GLM-5's layout: block_count 2 of which the last is the multi-token-prediction block (nextn_predict_layers 1).
kv = [("general.architecture", 8, s("glm-dsa")), ("glm-dsa.block_count", 4, struct.pack("<I", 2)),
      ("glm-dsa.nextn_predict_layers", 4, struct.pack("<I", 1))]
tensors = [("blk.0.attn_q.weight", [64, 64], 8), ("blk.1.attn_q.weight", [64, 64], 8)]
open(f"{d}/mtp.gguf", "wb").write(header(kv, tensors))
EOF
python3 "$table" touched-bytes "$tmp/t.gguf" --json "$tmp/tb.json" > /dev/null || fail "touched-bytes exited $?"
# one embedding row (64 f32) + output 100 rows x 2 blocks x 34 + attn_q 64 x 2 x 34 + experts 16 x 32 x 2 x 34 x 4/16 + norm 64 x 4
want=$(( 64 * 4 + 100 * 2 * 34 + 64 * 2 * 34 + 16 * 32 * 2 * 34 * 4 / 16 + 64 * 4 ))
got=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["weights_bytes_per_token"], d["tensor_bytes"])' "$tmp/tb.json")
[ "$got" = "$want $(( 64 * 100 * 4 + 100 * 2 * 34 + 64 * 2 * 34 + 16 * 32 * 2 * 34 + 64 * 4 ))" ] \
    || fail "touched-bytes gave '$got', expected $want per token"
expect_table 1 "ends inside" touched-bytes "$tmp/t-trunc.gguf"
python3 "$table" touched-bytes "$tmp/mtp.gguf" --json "$tmp/mtp.json" > /dev/null || fail "touched-bytes (MTP) exited $?"
got=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["weights_bytes_per_token"], d["tensor_bytes"])' "$tmp/mtp.json")
[ "$got" = "$(( 64 * 2 * 34 )) $(( 2 * 64 * 2 * 34 ))" ] || fail "touched-bytes counted the MTP block: '$got'"

# ---- dry run of the whole script: CPU ds4 on a tiny model, a stand-in llama-bench ---------------------------------
[ -x "$bin/ds4-gguf" ] && [ -x "$bin/ds4-bench" ] || fail "the dry run needs $bin/ds4-gguf and $bin/ds4-bench (build them)"
cat > "$tmp/llama-bench" <<EOF
#!/bin/bash
[ "\${1:-}" != --help ] || exit 0
echo "\$*" > "$tmp/llama-args"
cat "$tmp/llama.json"
EOF
chmod +x "$tmp/llama-bench"
OUT=$tmp/dry LLAMA_BENCH=$tmp/llama-bench BANDWIDTH_GBPS=1000 DS4_BACKEND=cpu QWEN_PRESET=tiny DS4_DEPS_DIR=${DS4_DEPS_DIR:-} \
    bash "$vs" --ds4-bin "$bin" --models qwen3 --qwen-type q8_0 --work "$tmp/work" > "$tmp/dry.out" 2> "$tmp/dry.err" \
    || fail "dry run exited $?: $(tail -5 "$tmp/dry.err")"
for f in vs-llama.md vs-llama-raw.tar.xz; do [ -s "$tmp/dry/$f" ] || fail "dry run wrote no $f"; done
grep -q "^| qwen3moe tiny q8_0 | tg128 @ d512 | $(printf '%.2f' "$(val ltg512)") | [0-9.]* | [0-9.]*× |" "$tmp/dry/vs-llama.md" \
    || fail "dry-run table: $(cat "$tmp/dry/vs-llama.md")"
grep -q -- "-p 512,4096 -n 128 -d 0,512 -ngl 99 -fa 1" "$tmp/llama-args" || fail "llama-bench flags: $(cat "$tmp/llama-args")"
[ -z "$(ls -A "$tmp/work")" ] || fail "the dry run left files in its work folder: $(ls "$tmp/work")"
echo "ok"
