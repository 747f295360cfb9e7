#!/usr/bin/env bash
# Expert cache hit rates on generated routing traces (issue 11's target:
# device+host >= 80% with a device cache of 50% of the experts on a skewed
# trace, the uniform case beside it). A hit rate is a count, so any machine
# gives the same table: ds4-trace replay runs the cache's own policy
# (CachePolicy) without a model or a read.
#
#   bash bench/routing-hit-rates.sh [BUILD_DIR] > table.md
#
# Traces: 2,000 decode tokens, cold start included, fixed seeds, per-block
# Zipf(s) popularity over a random permutation of the ids, s in {0.8, 1.0,
# 1.2}, and uniform. Shapes: DeepSeek V4 Flash (src/synth/deepseek4.cpp:
# 43 MoE blocks x 256 experts, 6 per token) and Qwen3-30B-A3B
# (src/synth/qwen3moe.cpp: 48 x 128, 8 per token). Device budgets 25%, 50%,
# 75% of all experts, without a host tier and with one of 25% more of the
# experts (the tier holds every expert read, the device's included).
# Bytes per expert: the plan lines recorded in bench/RESULTS.md (Flash q2
# 6.75 MiB, Qwen3-30B-A3B q4_k_m 2.92 MiB).
set -euo pipefail
build=${1:-build}
tokens=2000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

shapes=("flash 43 256 6 7077888" "qwen3-30b-a3b 48 128 8 3061842")
skews=("uniform" "0.8" "1.0" "1.2")

for shape in "${shapes[@]}"; do
  read -r name blocks experts used bytes <<<"$shape"
  for s in "${skews[@]}"; do
    trace=$work/$name-$s.trace
    if [[ $s == uniform ]]; then kind=(--uniform); else kind=(--zipf "$s"); fi
    "$build/ds4-trace" gen --blocks "$blocks" --experts "$experts" --experts-per-token "$used" --tokens "$tokens" \
      "${kind[@]}" --seed 1 --out "$trace" >/dev/null
    for dev in 0.25 0.50 0.75; do
      for host in none more; do
        h=()
        [[ $host == more ]] && h=(--host-fraction "$(python3 -c "print(min(1.0, $dev + 0.25))")")
        "$build/ds4-trace" replay "$trace" --device-fraction "$dev" "${h[@]}" --bytes-per-expert "$bytes" \
          --json "$work/$name-$s-$dev-$host.json" >/dev/null
      done
    done
  done
done

python3 - "$work" "$tokens" <<'EOF'
import json, os, sys
work, tokens = sys.argv[1], sys.argv[2]
print(f"| model shape | routing | device budget | device hits | + host tier of 25% more: device+host | misses / token (no tier) | disk MiB / token (no tier → with tier) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name in ("flash", "qwen3-30b-a3b"):
    for s in ("uniform", "0.8", "1.0", "1.2"):
        for dev in ("0.25", "0.50", "0.75"):
            a = json.load(open(os.path.join(work, f"{name}-{s}-{dev}-none.json")))
            b = json.load(open(os.path.join(work, f"{name}-{s}-{dev}-more.json")))
            mib = lambda j: j["disk_bytes_per_token"] / 2**20
            routing = "uniform" if s == "uniform" else f"Zipf s={s}"
            print(f"| {name} | {routing} | {float(dev):.0%} | {a['hit_rate']:.1%} | {b['hit_rate']:.1%} "
                  f"(host {b['host_hit_rate']:.1%}) | {a['misses_per_token']:.1f} | {mib(a):.0f} → {mib(b):.0f} |")
EOF
