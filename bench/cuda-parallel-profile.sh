#!/bin/bash
# Where a batched decode step's time goes on the GPU machine: ds4-bench --parallel N with the per-op profile
# (DS4_CUDA_PROFILE=1, op by op, not recorded) on the Qwen3-30B-A3B-shaped q4_k_m file, for each N given.
#
# Here: bash bench/cuda-correctness.sh --pack build   (.gpurun/pk.tar.xz with ds4-bench and ds4-gguf)
# There (carry [".gpurun"]): bash bench/cuda-parallel-profile.sh .gpurun [N...]   (env DS4_BENCH_FLAGS: extra flags)
# Output under $OUT: profile-N.txt per N; the op table of each on stdout.
set -u
src=$(cd "${1:?usage: bench/cuda-parallel-profile.sh FOLDER-WITH-pk.tar.xz [N...]}" && pwd); shift
ns=${*:-1 8 16}
O=${OUT:-/tmp/out}; mkdir -p "$O"
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"
export LD_LIBRARY_PATH=$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
f=/dev/shm/q30b-q4km.gguf
[ -f "$f" ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 \
  --out "$f" > "$O/synth.log" 2>&1 || { tail -5 "$O/synth.log"; exit 1; }
for n in $ns; do
  # shellcheck disable=SC2086
  DS4_CUDA_PROFILE=1 timeout 200 "$B/ds4-bench" -m "$f" --backend cuda ${DS4_BENCH_FLAGS:-} --ctx-start 512 \
    --ctx-max 512 --step-incr 1 --gen-tokens 32 --prefill-chunk 512 --parallel "$n" > "$O/profile-$n.txt" 2>&1
  echo "== N=$n"; grep -E "generation|ops timed" "$O/profile-$n.txt"
  grep -vE "prefill|gemm" "$O/profile-$n.txt" | grep -E "^  [a-z]" | head -22
done
