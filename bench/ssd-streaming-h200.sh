#!/bin/bash
# SSD streaming on the GPU machine: the reader test and the streamed-vs-resident logits test there (CUDA backend,
# its file system, io_uring and O_DIRECT as that kernel allows), then ds4-bench on a DeepSeek V4 Flash q2 file of
# 16 blocks: resident, and streamed at cache budgets of half the experts, twice the working set and the working
# set, through io_uring + O_DIRECT and through the pread pool (page cache), page cache dropped before each.
#
# Here:   bash bench/ssd-streaming-h200.sh --pack build        # writes .gpurun-ssd/pk.tar.xz (git-ignored)
# There (carry [".gpurun-ssd"]):  bash bench/ssd-streaming-h200.sh .gpurun-ssd [tests|bench|host]   (default: tests
# and bench; host: a Qwen3-30B-A3B-shaped q4_k_m file with half its experts on the GPU and the host tier on or off)
# Output under $OUT: logs and ds4-bench --json files; the summary on stdout.
set -u
if [ "${1:-}" = "--pack" ]; then
  build=${2:?usage: bench/ssd-streaming-h200.sh --pack BUILD_DIR}
  repo=$(cd "$(dirname "$0")/.." && pwd)
  grep -qx '/.gpurun-ssd/' "$repo/.git/info/exclude" 2>/dev/null || echo '/.gpurun-ssd/' >> "$repo/.git/info/exclude"
  out=$repo/.gpurun-ssd; mkdir -p "$out"; st=$(mktemp -d)
  cp "$build/ds4" "$build/ds4-gguf" "$build/ds4-bench" "$build/tests/experts_reader_test" "$build/tests/cudabackend_model_test" "$st/" || exit 1
  strip "$st"/*
  for b in "$st"/*; do ldd "$b"; done | awk '$3 ~ /^\/(usr\/)?lib\/x86_64-linux-gnu\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$st/"; done
  cp "$repo/tests/integration/test_ssd_streaming.sh" "$st/"
  git -C "$repo" rev-parse HEAD > "$st/commit"; git -C "$repo" status --short >> "$st/commit"
  tar cf - -C "$st" . | xz -9 -T1 > "$out/pk.tar.xz" && rm -rf "$st"; du -sh "$out"/*; exit 0
fi
src=${1:?usage: bench/ssd-streaming-h200.sh FOLDER-WITH-pk.tar.xz [tests|bench] | --pack BUILD_DIR}
what=${2:-both}
src=$(cd "$src" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ nvidia-smi -L; date -u; cat "$B/commit"; uname -r; df -T /tmp | tail -1; } > "$O/env.txt" 2>&1
if [ "$what" = both ] || [ "$what" = tests ]; then
  (cd "$B" && ./experts_reader_test > "$O/reader.txt" 2>&1; echo "experts_reader_test rc=$?" >> "$O/reader.txt")
  grep -hE "^\[  (PASSED|FAILED) |rc=" "$O/reader.txt"
  (cd "$B" && DS4_BIN=$B ./cudabackend_model_test --gtest_filter='*ExpertCache*:-*q4_k_m*' > "$O/cuda-cache.txt" 2>&1; echo "cudabackend_model_test rc=$?" >> "$O/cuda-cache.txt")
  grep -hE "^\[  (PASSED|FAILED) |rc=" "$O/cuda-cache.txt"
  DS4_BIN=$B timeout 400 bash "$B/test_ssd_streaming.sh" > "$O/ssd-test.txt" 2>&1; echo "test_ssd_streaming rc=$?" >> "$O/ssd-test.txt"
  tail -2 "$O/ssd-test.txt"
fi
[ "$what" = tests ] && exit 0
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "(page cache dropped)"; }
if [ "$what" = host ]; then
  # Experts that fit RAM but (by budget) not the GPU: a Qwen3-30B-A3B-shaped q4_k_m file, half its experts in the
  # device cache, the rest in the host tier (automatic) or none; frontiers 16, 48, 80 (the later probes warm).
  D=$(mktemp -d)
  "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out "$D/q.gguf" | tail -1
  W="--ctx-start 16 --ctx-max 80 --step-incr 32 --gen-tokens 64 --prefill-chunk 16"
  timeout 120 "$B/ds4-bench" -m "$D/q.gguf" $W --json "$O/q-resident.json" > /dev/null 2> "$O/q-resident.txt"
  echo "== resident"; grep -E "ctx " "$O/q-resident.txt"
  for host in auto 0; do
    drop
    flags=(--ssd-streaming --ssd-streaming-cache-experts 3072)
    [ "$host" = 0 ] && flags+=(--ssd-streaming-host-cache 0)
    timeout 200 "$B/ds4-bench" -m "$D/q.gguf" $W "${flags[@]}" --json "$O/q-host-$host.json" > /dev/null 2> "$O/q-host-$host.txt"
    echo "== device cache 3072 of 6144, host tier $host"; grep -E "ctx |experts:|ssd-streaming:" "$O/q-host-$host.txt"
  done
  rm -rf "$D"; exit 0
fi
D=$(mktemp -d)
t0=$(date +%s)
"$B/ds4-gguf" synth --arch deepseek4 --preset flash --quant q2 --n-layer 16 --no-tokenizer --seed 1 --out "$D/f16.gguf" | tail -1
echo "synth $(( $(date +%s) - t0 )) s, $(du -h "$D/f16.gguf" | cut -f1)"
W="--ctx-start 16 --ctx-max 16 --step-incr 1 --gen-tokens 16 --prefill-chunk 16"
timeout 200 "$B/ds4-bench" -m "$D/f16.gguf" $W --json "$O/resident.json" > /dev/null 2> "$O/resident.txt"
grep -E "ctx |backend" "$O/resident.txt"
# The disk alone: one pass of O_DIRECT reads over 8 GiB of the file.
drop; dd if="$D/f16.gguf" of=/dev/null bs=8M count=1024 iflag=direct 2>&1 | tail -1
for io in io_uring pread; do
  for b in 2048 192; do
    drop
    timeout 150 "$B/ds4-bench" -m "$D/f16.gguf" $W --ssd-streaming --ssd-streaming-cache-experts $b --ssd-streaming-io $io \
      --json "$O/ssd-$io-$b.json" > /dev/null 2> "$O/ssd-$io-$b.txt"
    echo "== $io, cache $b experts"; grep -E "ctx |experts:|ssd-streaming:" "$O/ssd-$io-$b.txt"
  done
done
rm -rf "$D"
