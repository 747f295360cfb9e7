#!/usr/bin/env bash
# ds4-server under bounded load on loopback: a tiny Qwen3-MoE with 4 slots
# and 32 concurrent clients of the official openai npm SDK for
# DS4_LOAD_SECONDS (default 60, the first 5 s a warm-up), driven by
# server_load_client.mjs: whole and streamed chat completions and
# completions, the SDK's stream helper, streams aborted with an
# AbortController after their first piece; greedy prompts whose replies
# alone were read first. Checks: no crash; no request failed; every reply
# not aborted is its prompt's reply alone, with a finish_reason and the same
# usage, streamed text = the concatenated deltas; the server healthy
# afterwards, slots and queue idle; VmRSS grows by less than 32 MiB from the
# end of the warm-up to the end; /metrics counts exactly the requests,
# generations and prompt tokens the clients sent, and the tokens they got.
set -euo pipefail
seconds=${DS4_LOAD_SECONDS:-60}
source "$(dirname "$0")/server_helpers.sh"

"$bin/ds4-gguf" synth --arch qwen3moe --preset tiny --seed "$seed" --out "$tmp/m.gguf" >/dev/null
key=k$RANDOM$RANDOM
# The RAM prefix cache is bounded (16 MiB) and fills during the warm-up
# (16 prompts, a few KiB of KV each): memory after it is the steady state.
start_server -m "$tmp/m.gguf" --backend cpu -t 2 --parallel 4 --ctx 256 --api-key "$key" --cache-ram-mb 16

[ "$seconds" -gt 5 ] || fail "DS4_LOAD_SECONDS must be more than the 5 s of warm-up"
node "$src/tests/integration/server_load_client.mjs" "$deps/npm/node_modules" "$base" "$key" "$pid" 32 5 $((seconds - 5)) \
  >"$tmp/load.json" 2>"$tmp/load.err" || fail "load client: $(tail -c 2000 "$tmp/load.err")"
kill -0 "$pid" 2>/dev/null || fail "the server died under load"
[ "$(curl -s "$base/health")" = '{"status":"ok"}' ] || fail "expected /health ok after the load"

# Aborted generations end at the scheduler's next step: wait for idle.
for _ in $(seq 100); do
  curl -s -H "Authorization: Bearer $key" "$base/metrics" >"$tmp/metrics"
  grep -q '^ds4_kv_slots_in_use 0$' "$tmp/metrics" && grep -q '^ds4_queue_depth 0$' "$tmp/metrics" && break
  sleep 0.1
done
python3 - "$tmp/load.json" "$tmp/metrics" <<'PY' || fail "load results (above: what was expected)"
import json, re, sys
d = json.load(open(sys.argv[1]))
metrics = open(sys.argv[2]).read()
def m(name, **labels):
    lab = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
    x = re.search("^" + re.escape(name + lab) + r" (\S+)$", metrics, re.M)
    return float(x.group(1)) if x else 0.0
s, bad = d["sent"], list(d["problems"])
total = s["chat"] + s["completions"]
print(f"load: {total} requests by 32 clients in {d['loadSeconds'] + 5:.0f} s ({s['aborted']} aborted, {s['errors']} failed), "
      f"VmRSS {d['rssWarm'] >> 20} MiB after the warm-up, {d['rssEnd'] >> 20} MiB at the end")
if s["errors"]: bad.append(f"expected no failed request, {s['errors']} failed")
if total - d["warmSent"]["chat"] - d["warmSent"]["completions"] < 100:
    bad.append(f"expected at least 100 requests under load, the clients sent {total}")
if s["aborted"] == 0: bad.append("expected some streams aborted by their clients, none was")
# A leak of a few KiB per request would pass 32 MiB over these thousands;
# the rest is bounded once warm: KV slots are allocated at start, the
# prefix cache is capped at 16 MiB and full, the HTTP threads are a fixed
# pool, malloc's arenas are at most 8 per core.
grow = d["rssEnd"] - d["rssWarm"]
if grow >= 32 << 20: bad.append(f"expected VmRSS to grow by less than 32 MiB after the warm-up, it grew {grow >> 20} MiB")
def eq(what, got, want):
    if got != want: bad.append(f"/metrics {what}: expected {want} (what the clients sent and got), got {got}")
eq("chat requests answered 200", m("ds4_requests_total", endpoint="/v1/chat/completions", status="200"), s["chat"])
eq("completion requests answered 200", m("ds4_requests_total", endpoint="/v1/completions", status="200"), s["completions"])
eq("generations", m("ds4_generations_total"), total)
eq("prompt tokens", m("ds4_prompt_tokens_total"), s["promptTokens"])
gen = m("ds4_generated_tokens_total")
# Aborted streams wrote at least their first piece, at most max_tokens (10).
if not s["completionTokens"] + s["aborted"] <= gen <= s["completionTokens"] + 10 * s["aborted"]:
    bad.append(f"/metrics generated tokens: expected {s['completionTokens']} + 1..10 per aborted stream "
               f"({s['aborted']}), got {gen}")
# Only 200s (/health's 503s are start_server's polls while the model loaded).
others = [l for l in metrics.splitlines()
          if l.startswith("ds4_requests_total") and 'status="200"' not in l and 'endpoint="/health"' not in l]
if others: bad.append(f"expected only 200s, /metrics counts {others}")
for b in bad: print("FAIL: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# Still serving the same greedy text as before the load.
python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["first"]["body"]))' "$tmp/load.json" >"$tmp/first"
curl -s -H "Authorization: Bearer $key" -H "Content-Type: application/json" "$base/v1/chat/completions" \
  -d @"$tmp/first" >"$tmp/after"
python3 - "$tmp/load.json" "$tmp/after" <<'PY' || fail "expected the first prompt's reply as before the load, got $(head -c 300 "$tmp/after")"
import json, sys
sys.exit(json.load(open(sys.argv[2]))["choices"][0]["message"]["content"] != json.load(open(sys.argv[1]))["first"]["text"])
PY
stop_server
echo "server load: ok (seed $seed)"
