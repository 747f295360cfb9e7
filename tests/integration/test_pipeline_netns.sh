#!/usr/bin/env bash
# The pipeline between two network namespaces joined by a veth pair, each
# side delaying its packets with `tc netem` (1-20 ms each way, random): a
# coordinator in one, a worker in the other, real addresses off loopback (so
# a cluster key is required), a random prefill window of chunks in flight.
# The 300-token prompt's logits equal one process's bit for bit.
# Skips, saying why, only where network namespaces cannot be made (not root).
set -euo pipefail
bin=${DS4_BIN:?}
tmp=$(mktemp -d)
source "$(dirname "$0")/seed.sh"  # seed (DS4_TEST_SEED), RANDOM seeded with it
na=ds4a-$$; nb=ds4b-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  ip netns del "$na" 2>/dev/null || true
  ip netns del "$nb" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL (seed $seed): $*" >&2; exit 1; }
if ! ip netns add "$na" 2>"$tmp/why"; then
  echo "SKIP: cannot create a network namespace ($(tr '\n' ' ' <"$tmp/why")); this test needs root"
  exit 0
fi
ip netns add "$nb"
# A random /24 in 10.213.x.0: two runs at once do not collide.
net=10.213.$((RANDOM % 250))
ip link add "va$$" netns "$na" type veth peer name "vb$$" netns "$nb"
ip -n "$na" addr add "$net.1/24" dev "va$$"
ip -n "$nb" addr add "$net.2/24" dev "vb$$"
for ns in "$na" "$nb"; do ip -n "$ns" link set lo up; done
ip -n "$na" link set "va$$" up
ip -n "$nb" link set "vb$$" up
da=$((1 + RANDOM % 20)); db=$((1 + RANDOM % 20))
if ip netns exec "$na" tc qdisc add dev "va$$" root netem delay "${da}ms" 2>"$tmp/why"; then
  ip netns exec "$nb" tc qdisc add dev "vb$$" root netem delay "${db}ms"
  link="delay ${da}+${db} ms"
else
  # A kernel built without sch_netem (this development VM's) cannot delay
  # packets; a token bucket still makes the link slow (and says so).
  echo "note: tc netem unavailable ($(tr '\n' ' ' <"$tmp/why")); shaping the veth with tbf at 200 mbit/s instead"
  for x in "$na va$$" "$nb vb$$"; do
    set -- $x
    ip netns exec "$1" tc qdisc add dev "$2" root tbf rate 200mbit burst 256kb latency 50ms
  done
  link="tbf 200 mbit/s"
fi

arch=$([[ $((RANDOM % 2)) == 0 ]] && echo qwen3moe || echo deepseek4)
m=$tmp/m.gguf
"$bin/ds4-gguf" synth --arch "$arch" --preset tiny --no-tokenizer --seed "$seed" --out "$m" >/dev/null
nl=$("$bin/ds4-gguf" inspect "$m" | sed -n "s/^  $arch.block_count *u32 *\([0-9]*\)$/\1/p")
v=$("$bin/ds4-gguf" inspect "$m" | sed -n "s/^  $arch.vocab_size *u32 *\([0-9]*\)$/\1/p")
python3 -c "import random; r=random.Random($seed); print(' '.join(str(r.randrange($v)) for _ in range(300)))" >"$tmp/ids.txt"
chunk=$((16 + RANDOM % 100)); win=$((1 + RANDOM % 8)); a=$((RANDOM % (nl - 1)))
"$bin/ds4" -m "$m" --token-ids "$tmp/ids.txt" --dump-logits "$tmp/ref.bin" -t 1 --prefill-chunk "$chunk" 2>"$tmp/err" \
  || fail "single process: $(cat "$tmp/err")"

# gRPC would take a proxy from the environment; these addresses are direct.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY grpc_proxy
export DS4_CLUSTER_KEY=netns-test-key-$seed-0123456789
port=$((20000 + RANDOM % 20000))  # fresh namespaces: nothing else listens there
# The head on the last worker (it returns logits) or on the coordinator (the worker returns its final hidden
# rows), drawn each run; test_pipeline.sh runs both on loopback.
if (( RANDOM % 2 )); then wl="$((a + 1)):output"; cl="0:$a"; else wl="$((a + 1)):$((nl - 1))"; cl="0:$a,output"; fi
ip netns exec "$nb" "$bin/ds4" -m "$m" --role worker --layers "$wl" --coordinator "$net.1" "$port" \
  --listen "$net.2" "$((port + 1))" -t 1 >"$tmp/w.log" 2>&1 &
pids+=("$!")
start=$(date +%s)
ip netns exec "$na" "$bin/ds4" -m "$m" --role coordinator --layers "$cl" --listen "$net.1" "$port" \
  --token-ids "$tmp/ids.txt" --dump-logits "$tmp/two.bin" -t 1 --prefill-chunk "$chunk" --dist-prefill-window "$win" \
  2>"$tmp/err" || fail "$arch route across namespaces: $(cat "$tmp/err") / $(cat "$tmp/w.log")"
grep -q "^pipeline: route -> $net.2:$((port + 1)) " "$tmp/err" || fail "no route to the other namespace: $(cat "$tmp/err")"
cmp -s "$tmp/ref.bin" "$tmp/two.bin" \
  || fail "$arch across namespaces ($cl | $wl, $link, chunk $chunk, window $win) differs"
echo "pipeline across network namespaces: $arch, $cl | $wl, $link, chunk $chunk, window $win: exact in $(( $(date +%s) - start )) s (seed $seed)"
