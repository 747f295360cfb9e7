#!/usr/bin/env python3
"""One load generator for ds4-server and llama.cpp's llama-server (issue 10's H200 benchmark).

C concurrent clients, each sending streaming OpenAI chat completions back to back until R requests are done in
all: a shared system prefix (the same for every request, so a server may reuse it) plus a user prompt of its own,
max_tokens G, temperature 0. Prompts are made of words the client picks from a fixed list with a seeded random
generator, so both servers see the same texts. Per request: time to the first content token (TTFT), generated
tokens (the usage the server reports, else the content chunks counted), total time. Prints one JSON object:
aggregate generated tokens per second over the wall time of the whole run, TTFT p50/p90/p99, the per-request
decode rate, and errors (a request that fails is counted and reported, never silently dropped).

Standard library only (the GPU machine has no package registry).

usage: server_load.py --url http://127.0.0.1:8080 [--clients 32] [--requests 64] [--system-words 2000]
                      [--prompt-words 500] [--max-tokens 256] [--seed 1] [--model NAME] [--ignore-eos]
(the words are short and common: Qwen3's tokenizer makes ~1.02 tokens a word of them, so 2000 and 500 words are
the issue's ~2k-token shared prefix and ~512-token prompts)
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse

WORDS = ("the sea keeper light tower night storm ship wave rock harbor lamp wind rain cold old long story about "
         "and of to in a was he she they it his her their over under near far dark bright quiet loud water stone "
         "salt fog bell rope boat sail coast cliff gull tide moon star cloud shore island path door window").split()


def text(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def one_request(url, body, timeout):
    """Returns (ttft_s, tokens, total_s, gaps_s) or raises."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read(300)!r}")
    ttft, chunks, usage_tokens, last, gaps = None, 0, None, None, []
    buf = b""
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        ev = json.loads(data)
        if ev.get("usage"):
            usage_tokens = ev["usage"].get("completion_tokens")
        for ch in ev.get("choices") or []:
            delta = ch.get("delta") or {}
            if delta.get("content") or delta.get("reasoning_content"):
                now = time.perf_counter()
                if ttft is None:
                    ttft = now - t0
                else:
                    gaps.append(now - last)
                last = now
                chunks += 1
    total = time.perf_counter() - t0
    conn.close()
    if ttft is None:
        raise RuntimeError("the stream ended without a content token")
    return ttft, (usage_tokens if usage_tokens is not None else chunks), total, gaps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--system-words", type=int, default=2000)
    ap.add_argument("--prompt-words", type=int, default=500)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default="model")
    ap.add_argument("--ignore-eos", action="store_true", help="ask the server to generate max_tokens (llama-server)")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    if a.clients < 1 or a.requests < 1 or a.max_tokens < 1:
        ap.error("--clients, --requests and --max-tokens must be at least 1")
    rng = random.Random(a.seed)
    system = text(rng, a.system_words)
    prompts = [text(rng, a.prompt_words) for _ in range(a.requests)]
    lock = threading.Lock()
    next_req = [0]
    results, errors = [], []

    def client():
        while True:
            with lock:
                i = next_req[0]
                if i >= a.requests:
                    return
                next_req[0] += 1
            body = {"model": a.model, "stream": True, "stream_options": {"include_usage": True},
                    "max_tokens": a.max_tokens, "temperature": 0,
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompts[i]}]}
            if a.ignore_eos:
                body["ignore_eos"] = True
            try:
                r = one_request(a.url, body, a.timeout)
                with lock:
                    results.append(r)
            except Exception as e:  # counted and reported, never dropped
                with lock:
                    errors.append(f"request {i}: {e}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0

    def pct(v, p):
        v = sorted(v)
        return round(v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))], 4) if v else None

    ttft = [r[0] for r in results]
    itl = [g for r in results for g in r[3]]
    tokens = sum(r[1] for r in results)
    rates = [(r[1] - 1) / (r[2] - r[0]) for r in results if r[1] > 1 and r[2] > r[0]]
    out = {"url": a.url, "clients": a.clients, "requests": a.requests, "completed": len(results),
           "errors": len(errors), "max_tokens": a.max_tokens, "generated_tokens": tokens,
           "wall_s": round(wall, 3), "aggregate_tps": round(tokens / wall, 2) if wall > 0 else None,
           "ttft_p50_s": pct(ttft, 50), "ttft_p90_s": pct(ttft, 90), "ttft_p99_s": pct(ttft, 99),
           "itl_p50_s": pct(itl, 50), "itl_p99_s": pct(itl, 99),
           "per_request_decode_tps_median": round(statistics.median(rates), 2) if rates else None}
    print(json.dumps(out))
    for e in errors[:5]:
        print("error:", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
