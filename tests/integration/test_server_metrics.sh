#!/usr/bin/env bash
# GET /metrics of a real ds4-server on loopback: after a known set of
# requests (OpenAI and Anthropic, whole and streamed, a repeated prompt
# that reuses the prefix, refusals, an unknown path), the scrape parses as
# Prometheus text (python3-prometheus-client's parser, plus a strict line
# check here) and its counters equal what the responses reported: the
# usage fields' prompt, cached and generated tokens, prompt tokens
# evaluated = prompt - cached, prefix hits = requests with cached tokens,
# requests by endpoint and status, one time-to-first-token per reply with
# text, histograms cumulative; slots and queue idle afterwards, and a slot
# in use while a long stream runs; a request sharing a running one's system
# prompt takes it from that slot (a fork).
set -euo pipefail
source "$(dirname "$0")/server_helpers.sh"
# The exposition parser is Debian's python3-prometheus-client (system python).
PROM_PY=/usr/bin/python3
"$PROM_PY" -c 'import prometheus_client.parser' 2>/dev/null \
  || fail "python3-prometheus-client is missing for $PROM_PY (scripts/install-deps.sh installs it)"

"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
key=k$RANDOM
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 2 --ctx 512 --api-key "$key" --cache-ram-mb 64
H=(-H "Authorization: Bearer $key" -H "Content-Type: application/json")
n=0
req() {  # endpoint, body -> $tmp/r<n>.<endpoint tag>
  n=$((n + 1))
  curl -s "${H[@]}" "$base$1" -d "$2" >"$tmp/r$n.$(basename "$1")"
}
chat='{"messages":[{"role":"user","content":"Count the waves."}],"max_tokens":9,"temperature":0}'
req /v1/chat/completions "$chat"
req /v1/chat/completions "$chat"   # the same prompt again: its prefix is reused
req /v1/chat/completions '{"messages":[{"role":"user","content":"Another one"}],"max_tokens":5,"temperature":0.7,"seed":3,"stream":true,"stream_options":{"include_usage":true}}'
req /v1/completions '{"prompt":"Once upon","max_tokens":4,"temperature":0}'
req /v1/messages '{"max_tokens":7,"temperature":0,"messages":[{"role":"user","content":"Count the waves."}]}'
req /v1/messages '{"max_tokens":6,"temperature":0,"stream":true,"messages":[{"role":"user","content":"And the shells?"}]}'
req /v1/messages/count_tokens '{"messages":[{"role":"user","content":"x"}]}'
curl -s "${H[@]}" "$base/v1/chat/completions" -d '{"messages":[]}' >/dev/null          # 400
curl -s "${H[@]}" "$base/v1/messages" -d '{"messages":[]}' >/dev/null                  # 400
curl -s "$base/v1/models" >/dev/null                                                     # 401
curl -s "${H[@]}" "$base/v1/nowhere" >/dev/null                                          # 404

# The usage the responses reported, by an independent reading of each shape.
python3 - "$tmp" >"$tmp/usage.json" <<'PY' || fail "reading the responses"
import glob, json, os, sys
gens = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "r*.*")), key=lambda p: int(os.path.basename(p)[1:].split(".")[0])):
    kind, text = path.rsplit(".", 1)[1], open(path, encoding="utf-8").read()
    if kind == "count_tokens": continue
    if text.startswith("data: ") or text.startswith("event: "):
        said, usage = "", None
        for line in text.splitlines():
            if not line.startswith("data: ") or line == "data: [DONE]": continue
            d = json.loads(line[6:])
            if d.get("usage") and kind != "messages": usage = d["usage"]
            for c in d.get("choices", []): said += c.get("delta", {}).get("content", "") or ""
            if d.get("type") == "message_start": start = d["message"]["usage"]
            if d.get("type") == "message_delta": usage = dict(start, output_tokens=d["usage"]["output_tokens"])
            if d.get("type") == "content_block_delta": said += d["delta"].get("text", "")
    else:
        d = json.loads(text)
        usage = d["usage"]
        said = d["content"][0]["text"] if kind == "messages" else \
            (d["choices"][0].get("message", {}).get("content") or d["choices"][0].get("text", ""))
    if kind == "messages":
        g = {"prompt": usage["input_tokens"] + usage["cache_read_input_tokens"], "cached": usage["cache_read_input_tokens"],
             "generated": usage["output_tokens"]}
    else:
        g = {"prompt": usage["prompt_tokens"], "cached": usage["prompt_tokens_details"]["cached_tokens"],
             "generated": usage["completion_tokens"]}
    g["text"] = said != ""
    gens.append(g)
print(json.dumps(gens))
PY

# Requests are counted once their response is written: wait for the 404's.
for _ in $(seq 50); do
  curl -s "${H[@]}" "$base/metrics" >"$tmp/metrics"
  grep -q 'ds4_requests_total{endpoint="other",status="404"} 1' "$tmp/metrics" && break
  sleep 0.1
done
"$PROM_PY" - "$tmp/metrics" "$tmp/usage.json" <<'PY' || fail "metrics: $(cat "$tmp/metrics")"
import json, re, sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
gens = json.load(open(sys.argv[2]))
assert len(gens) == 6, gens
# Strict line format: HELP/TYPE comments, then samples of declared families.
typed = {}
for line in text.rstrip("\n").split("\n"):
    m = re.fullmatch(r"# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)", line)
    if m:
        if m.group(1) == "TYPE":
            assert m.group(3) in ("counter", "gauge", "histogram"), line
            typed[m.group(2)] = m.group(3)
        continue
    m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_]+="[^"\\\n]*"(,[a-zA-Z_]+="[^"\\\n]*")*\})? (\S+)', line)
    assert m, "not a sample line: " + repr(line)
    name = m.group(1)
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    assert name in typed or base in typed, "sample before its TYPE: " + line
    float(m.group(4))
samples = {}
for fam in text_string_to_metric_families(text):
    for s in fam.samples:
        samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
def v(name, **labels): return samples[(name, tuple(sorted(labels.items())))]
def eq(name, want, **labels):
    got = v(name, **labels)
    assert got == want, f"{name}{labels} = {got}, the responses say {want}"
prompt = sum(g["prompt"] for g in gens); cached = sum(g["cached"] for g in gens)
generated = sum(g["generated"] for g in gens)
eq("ds4_model_loaded", 1)
eq("ds4_generations_total", len(gens))
eq("ds4_prompt_tokens_total", prompt)
eq("ds4_cached_prompt_tokens_total", cached)
eq("ds4_generated_tokens_total", generated)
eq("ds4_prefill_tokens_total", prompt - cached)
assert cached > 0, "no request reused a prefix"
hits = sum(v("ds4_prefix_cache_hits_total", source=s) for s in ("slot", "ram", "fork"))
assert hits == sum(1 for g in gens if g["cached"] > 0), (hits, gens)
dec = v("ds4_decode_tokens_total")
assert generated - len(gens) <= dec <= generated, (dec, generated)
eq("ds4_requests_total", 3, endpoint="/v1/chat/completions", status="200")
eq("ds4_requests_total", 1, endpoint="/v1/chat/completions", status="400")
eq("ds4_requests_total", 1, endpoint="/v1/completions", status="200")
eq("ds4_requests_total", 2, endpoint="/v1/messages", status="200")
eq("ds4_requests_total", 1, endpoint="/v1/messages", status="400")
eq("ds4_requests_total", 1, endpoint="/v1/messages/count_tokens", status="200")
eq("ds4_requests_total", 1, endpoint="/v1/models", status="401")
eq("ds4_requests_total", 1, endpoint="other", status="404")
eq("ds4_time_to_first_token_seconds_count", sum(1 for g in gens if g["text"]))
# One sample between consecutive pieces of a reply: a piece per generated
# token at most, plus the text held back (a possible stop string's start,
# an unfinished UTF-8 sequence) that the end of the reply lets out as one
# more piece, so at most `generated` samples a request.
itl = v("ds4_inter_token_latency_seconds_count")
assert 0 < itl <= sum(g["generated"] for g in gens), itl
for h in ("ds4_time_to_first_token_seconds", "ds4_inter_token_latency_seconds"):
    buckets = sorted(((float(dict(k[1])["le"]), val) for k, val in samples.items() if k[0] == h + "_bucket"))
    counts = [c for _, c in buckets]
    assert counts == sorted(counts) and buckets[-1][0] == float("inf") and counts[-1] == v(h + "_count"), buckets
    assert v(h + "_sum") > 0
eq("ds4_kv_slots", 2); eq("ds4_kv_slots_in_use", 0); eq("ds4_queue_depth", 0)
PY

# A long stream holds a slot while it runs.
curl -sN --max-time 60 "${H[@]}" "$base/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"Go on."}],"max_tokens":400,"temperature":0,"stream":true}' >"$tmp/long" &
long=$!
busy=
for _ in $(seq 100); do
  curl -s "${H[@]}" "$base/metrics" | grep -q '^ds4_kv_slots_in_use 1$' && { busy=1; break; }
  sleep 0.05
done
kill "$long" 2>/dev/null || true
wait "$long" 2>/dev/null || true
[ -n "$busy" ] || fail "no slot in use while a stream ran"

# One system prompt, two requests at once: the second takes the prefix the
# first one's slot holds (a fork: that slot is busy, the other is empty).
system=$(python3 -c 'import random, sys; r = random.Random(int(sys.argv[1])); print(" ".join(r.choice(["tide", "reef", "gull", "kelp", "dune", "salt"]) for _ in range(120)))' "$seed")
first=$(printf '{"messages":[{"role":"system","content":"%s"},{"role":"user","content":"Go on."}],"max_tokens":400,"temperature":0,"stream":true}' "$system")
second=$(printf '{"messages":[{"role":"system","content":"%s"},{"role":"user","content":"Stop."}],"max_tokens":3,"temperature":0}' "$system")
curl -sN --max-time 60 "${H[@]}" "$base/v1/chat/completions" -d "$first" >"$tmp/first" &
long=$!
for _ in $(seq 100); do grep -q '"content"' "$tmp/first" 2>/dev/null && break; sleep 0.05; done
curl -s "${H[@]}" "$base/v1/chat/completions" -d "$second" >"$tmp/second"
kill "$long" 2>/dev/null || true
wait "$long" 2>/dev/null || true
cached=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens_details"]["cached_tokens"])' "$tmp/second") \
  || fail "the second request's answer: $(cat "$tmp/second")"
[ "$cached" -ge 100 ] || fail "the second request reused $cached tokens of the shared system prompt"
forks=$(curl -s "${H[@]}" "$base/metrics" | sed -n 's/^ds4_prefix_cache_hits_total{source="fork"} //p')
[ "$forks" = 1 ] || fail "/metrics counts $forks forks, want 1"

stop_server
echo "server metrics: ok"
