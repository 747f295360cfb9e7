#!/bin/bash
# Issue 11's memory-capped benchmark on a CPU machine: a DeepSeek V4 Flash q2 file several times the cap,
# run by ds4-bench with --ssd-streaming and --simulate-used-memory (the automatic cache budget computed as if
# only CAP_GIB of the RAM were free), without a cap and under a memory cgroup of CAP_GIB, and plain mmap
# (no --ssd-streaming) under the same cgroup. The page cache is dropped before every run and every dd.
#
#   bash bench/ssd-memcap-cpu.sh BUILD_DIR WORK_DIR [LOG_DIR]
#   bash bench/ssd-memcap-cpu.sh --summary LOG_DIR      # the table again, from the logs
#
# WORK_DIR holds the synthesized file (N_LAYER blocks, default 10: 19.9 GiB), deleted at the end unless
# KEEP=1. CAP_GIB (default 6) is the cap; THREADS (default: all cores); REPEAT (default 2): every walk that
# many times, interleaved (other work on the machine shows as the spread). Logs, CSV and --json files go to LOG_DIR
# (default bench/logs/DATE-cpu-memcap), the table to stdout and LOG_DIR/summary.md.
#
# The cap: `systemd-run --scope -p MemoryMax=` where systemd runs, else a cgroup v2 child with memory.max, else
# a cgroup v1 child of this shell's memory cgroup with memory.limit_in_bytes; none of them: the capped runs
# are skipped and env.txt says why. The cgroup counts the page cache too, so the plain mmap run keeps at most
# CAP_GIB of the file in memory. The automatic budget sees the cgroup's room too (common/host_memory.cpp):
# stream-auto-capped runs without --simulate-used-memory.
set -u
# summary LOG_DIR: the table from a run's logs and --json files (also alone: --summary LOG_DIR).
summary() {
python3 - "$1" <<'EOF' | tee "$1/summary.md"
import json, os, re, statistics, sys
L = sys.argv[1]
scale = {"kB/s": 1e-3, "MB/s": 1.0, "GB/s": 1e3}
dd = [float(m.group(1)) * scale[m.group(2)]
      for m in re.finditer(r"copied, [0-9.]+ s, ([0-9.]+) ([kMG]B/s)", open(f"{L}/dd.txt").read())]
disk = statistics.median(dd) / 1e3  # GB/s
print(f"disk (dd, 8 MiB O_DIRECT, median of {len(dd)}): {disk:.2f} GB/s ({', '.join(f'{x:.0f}' for x in dd)} MB/s)")
m = re.search(r"4 readers: ([0-9]+) bytes in ([0-9.]+) s", open(f"{L}/dd.txt").read())
if m:
    print(f"disk, four dd readers at once: {int(m.group(1)) / float(m.group(2)) / 1e9:.2f} GB/s")
print("\nI/O bound: decode's bytes missed per token / the one-reader dd figure.\n")
print("Decode waited: the share of decode's wall time spent waiting on expert reads (runs before the overlap: —).")
print("Read ahead: experts the router lookahead read, and how many of them a step then used.\n")
print("| run | cap | load before | prefill t/s | decode t/s | hit rate | GiB read (cache) | GiB read (disk, pgpgin) | decode MiB missed/token | I/O bound t/s | decode / bound | decode waited | read ahead (used) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
order = ["stream-sim-serial", "stream-sim-nolookahead", "stream-sim", "stream-sim-capped", "stream-auto-capped",
         "mmap-capped", "stream-sim-pread-capped"]
names = sorted((f[:-5] for f in os.listdir(L) if f.endswith(".json")),
               key=lambda n: (order.index(n.rsplit("-", 1)[0]) if n.rsplit("-", 1)[0] in order else 99, n))
for name in names:
    p = f"{L}/{name}.json"
    j = json.load(open(p))
    r = j["rows"][0]
    c = j.get("expert_cache")
    gen_tokens = 16  # --gen-tokens of the walk above
    cap = "cgroup" if "capped" in name else "none"
    log = open(f"{L}/{name}.txt").read()
    m = re.search(r"disk read ([0-9]+) KiB", log)
    lm = re.search(r"load before: ([0-9.]+)", log)
    load = lm.group(1) if lm else "?"
    disk_gib = f"{int(m.group(1)) / 2**20:.2f}" if m else "?"
    if c:
        per_tok = r["gen_expert_bytes_read"] / gen_tokens
        bound = disk * 1e9 / per_tok if per_tok else float("inf")
        stall = r.get("gen_expert_stall_seconds")
        waited = f"{100 * stall * r['gen_tps'] / gen_tokens:.0f} %" if stall is not None else "—"
        ahead = f"{c['lookahead_reads']} ({c['lookahead_hits']})" if "lookahead_reads" in c else "—"
        print(f"| {name} | {cap} | {load} | {r['prefill_tps']:.2f} | {r['gen_tps']:.2f} | {100 * c['hits'] / max(1, c['lookups']):.1f} % "
              f"| {c['bytes_read'] / 2**30:.2f} | {disk_gib} | {per_tok / 2**20:.0f} | {bound:.2f} | {100 * r['gen_tps'] / bound:.0f} % "
              f"| {waited} | {ahead} |")
    else:
        print(f"| {name} | {cap} | {load} | {r['prefill_tps']:.2f} | {r['gen_tps']:.2f} | — | — | {disk_gib} | — | — | — | — | — |")
EOF
}
if [ "${1:-}" = "--summary" ]; then summary "${2:?usage: bench/ssd-memcap-cpu.sh --summary LOG_DIR}"; exit; fi

B=$(cd "${1:?usage: bench/ssd-memcap-cpu.sh BUILD_DIR WORK_DIR [LOG_DIR]}" && pwd)
W=${2:?usage: bench/ssd-memcap-cpu.sh BUILD_DIR WORK_DIR [LOG_DIR]}
repo=$(cd "$(dirname "$0")/.." && pwd)
L=${3:-$repo/bench/logs/$(date -u +%Y-%m-%d)-cpu-memcap}
N_LAYER=${N_LAYER:-10}
CAP_GIB=${CAP_GIB:-6}
THREADS=${THREADS:-$(nproc)}
mkdir -p "$W" "$L"
F=$W/flash-q2-l$N_LAYER.gguf

drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(could not drop the page cache)" >&2; }

{
  echo "date: $(date -u)"; echo "commit: $(git -C "$repo" rev-parse HEAD)"; git -C "$repo" status --short | grep -v '^??'
  echo "kernel: $(uname -r)"; echo "cores: $(nproc)"; grep -E '^(MemTotal|MemAvailable|SwapTotal):' /proc/meminfo
  df -T "$W" | tail -1
} >> "$L/env.txt"

if [ ! -f "$F" ]; then
  t0=$(date +%s)
  "$B/ds4-gguf" synth --arch deepseek4 --preset flash --quant q2 --n-layer "$N_LAYER" --no-tokenizer --seed 1 \
    --out "$F" | tail -1 | tee -a "$L/env.txt"
  echo "synthesized in $(( $(date +%s) - t0 )) s" >> "$L/env.txt"
fi
echo "file: $(stat -c %s "$F") bytes" >> "$L/env.txt"

# The disk alone: O_DIRECT reads of 2 GiB at three places in the file, one request at a time (DISK=skip:
# keep an earlier pass's figures).
if [ "${DISK:-}" != skip ]; then
: > "$L/dd.txt"
for skip in 0 800 1600; do
  drop
  dd if="$F" of=/dev/null bs=8M count=256 skip=$skip iflag=direct 2>&1 | tail -1 >> "$L/dd.txt"
done
# And four such readers at once (the cache keeps 32 reads in flight; one dd keeps one): 1 GiB each.
drop
t0=$(date +%s.%N)
for skip in 0 600 1200 1800; do
  dd if="$F" of=/dev/null bs=8M count=128 skip=$skip iflag=direct 2>/dev/null &
done
wait
echo "4 readers: 4294967296 bytes in $(echo "$(date +%s.%N) - $t0" | bc) s" >> "$L/dd.txt"
fi
cat "$L/dd.txt"

# How the cap is made here (one of three), or why not.
cap_how=none
cg=""
if timeout 20 systemd-run --scope -q -p MemoryMax=64M true 2>/dev/null; then
  cap_how=systemd-run
elif [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  cg=/sys/fs/cgroup/$(sed -n 's/^0:://p' /proc/self/cgroup)/ds4-memcap-$$
  mkdir "$cg" 2>/dev/null && echo $(( CAP_GIB << 30 )) > "$cg/memory.max" && cap_how=cgroup-v2
else
  v1=$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
  if [ -n "$v1" ] && [ -d "/sys/fs/cgroup/memory$v1" ]; then
    cg=/sys/fs/cgroup/memory$v1/ds4-memcap-$$
    mkdir "$cg" 2>/dev/null && echo $(( CAP_GIB << 30 )) > "$cg/memory.limit_in_bytes" && cap_how=cgroup-v1
  fi
fi
echo "cap: $cap_how (a child of this shell's memory cgroup) at $CAP_GIB GiB" >> "$L/env.txt"

# capped CMD...: CMD under the cap.
capped() {
  case $cap_how in
    systemd-run) systemd-run --scope -q -p MemoryMax=$(( CAP_GIB << 30 )) -p MemorySwapMax=0 "$@" ;;
    cgroup-v2|cgroup-v1) ( echo "$BASHPID" > "$cg/cgroup.procs" && exec "$@" ) ;;
  esac
}
# The cgroup's peak and its limit hits after a capped run.
cap_report() {
  case $cap_how in
    cgroup-v1) echo "cgroup peak $(cat "$cg/memory.max_usage_in_bytes") bytes, limit hit $(cat "$cg/memory.failcnt") times"
               echo 0 > "$cg/memory.max_usage_in_bytes"; echo 0 > "$cg/memory.failcnt" ;;
    cgroup-v2) echo "cgroup peak $(cat "$cg/memory.peak" 2>/dev/null) bytes; $(tr '\n' ' ' < "$cg/memory.events")" ;;
  esac
}

walk=(--ctx-start 32 --ctx-max 32 --step-incr 1 --gen-tokens 16 --prefill-chunk 32 -t "$THREADS")
# The simulated use: what is available now less the cap, so the automatic budget is half of CAP_GIB less 2 GiB.
avail=$(awk '/^MemAvailable:/ {print int($2 / 1048576)}' /proc/meminfo)
sim=$(( avail > CAP_GIB ? avail - CAP_GIB : 0 ))
ssd=(--ssd-streaming --simulate-used-memory "${sim}GB")
echo "simulated use: ${sim} GiB of ${avail} GiB available" >> "$L/env.txt"

# bench NAME CAP(0|1) ARGS...: one walk, the page cache dropped first.
bench() {
  local name=$1 cap=$2; shift 2
  drop
  local run=("$B/ds4-bench" -m "$F" "${walk[@]}" "$@" --json "$L/$name.json")
  echo "\$ ${run[*]}" | sed "s|$B/||; s|$F|FILE|; s|$L/||" > "$L/$name.txt"
  [ "$cap" = 1 ] && echo "(under the cap: $cap_how, $CAP_GIB GiB)" >> "$L/$name.txt"
  echo "load before: $(cat /proc/loadavg)" >> "$L/$name.txt"
  local t0 in0; t0=$(date +%s); in0=$(awk '$1 == "pgpgin" {print $2}' /proc/vmstat)
  if [ "$cap" = 1 ]; then capped timeout 400 "${run[@]}" > "$L/$name.csv" 2>> "$L/$name.txt"
  else timeout 400 "${run[@]}" > "$L/$name.csv" 2>> "$L/$name.txt"; fi
  echo "rc=$? wall $(( $(date +%s) - t0 )) s" >> "$L/$name.txt"
  # Block reads of the whole machine meanwhile (pgpgin, KiB): the mmap run has no expert counters.
  echo "disk read $(( $(awk '$1 == "pgpgin" {print $2}' /proc/vmstat) - in0 )) KiB (pgpgin, whole machine)" >> "$L/$name.txt"
  [ "$cap" = 1 ] && cap_report >> "$L/$name.txt"
  echo "== $name"; grep -E "ssd-streaming:|ctx |decode experts|experts: [0-9]|rc=|cgroup|disk read" "$L/$name.txt"
}

# RUNS: which walks (default all but the overlap's A/B: stream-sim-serial, stream-sim-nolookahead); each one
# REPEAT times, interleaved.
runs=${RUNS:-stream-sim stream-sim-capped mmap-capped stream-sim-pread-capped stream-auto-capped}
for rep in $(seq "${REPEAT:-2}"); do
  for r in $runs; do
    case $r in
      stream-sim) bench "$r-$rep" 0 "${ssd[@]}" ;;
      # What the CPU's overlap gains: reads waited for before compute, and
      # the overlap without the router lookahead.
      stream-sim-serial) bench "$r-$rep" 0 "${ssd[@]}" --ssd-streaming-overlap off ;;
      stream-sim-nolookahead) bench "$r-$rep" 0 "${ssd[@]}" --ssd-streaming-lookahead off ;;
      *-capped) [ "$cap_how" = none ] && continue ;;&
      stream-sim-capped) bench "$r-$rep" 1 "${ssd[@]}" ;;
      mmap-capped) bench "$r-$rep" 1 ;;
      stream-sim-pread-capped) bench "$r-$rep" 1 "${ssd[@]}" --ssd-streaming-io pread ;;
      # No simulated use: the automatic budget from the cgroup's own room.
      stream-auto-capped) bench "$r-$rep" 1 --ssd-streaming ;;
    esac
  done
done
[ -n "$cg" ] && rmdir "$cg"
sed -i "s|\"$F\"|\"FILE\"|" "$L"/*.json  # the logs name no local path

summary "$L"

[ "${KEEP:-0}" = 1 ] || rm -f "$F"
