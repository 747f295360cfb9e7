#!/bin/bash
# Session 2026-12-07g call 2 (same pack as call 1; carry [".gpurun"]): (1) prefill of a 512-token prompt with the
# small F32 products (routers) on small_f32_gemm.cu (DS4_CUDA_SMALL_F32_GEMM=1) or on the matvec kernels, t/s and the
# op profile with both prefill kernels on (DS4_CUDA_PROFILE=1: what the prefill is made of then); (2) the knockout table of a replayed decode step
# (bench/cuda-knockout.sh) with the L2 level call 1 chose (AHEAD); (vmm_probe moved to call 3).
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
mkdir -p "$O/n"; nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B
f=/dev/shm/q30b-q4km.gguf
[ -f $f ] || "$B/ds4-gguf" synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --no-tokenizer --seed 1 --out $f > "$O/n/synth.txt" 2>&1
P="--ctx-start 512 --ctx-max 512 --step-incr 1 --gen-tokens 4 --prefill-chunk 512"
for i in 1 2; do for s in 1 0; do
  DS4_CUDA_SMALL_F32_GEMM=$s timeout 60 "$B/ds4-bench" -m $f --backend cuda $P > /dev/null 2> "$O/n/pp-f32gemm$s-$i.txt"
  echo "== prefill small_f32_gemm=$s rc=$? $(el) s: $(grep -E 'ctx ' "$O/n/pp-f32gemm$s-$i.txt" | head -1 | sed 's/.*prefill/prefill/' | cut -c1-30)"
done; done
DS4_CUDA_SMALL_F32_GEMM=1 DS4_CUDA_GEMM_FRAG=1 DS4_CUDA_PROFILE=1 timeout 60 "$B/ds4-bench" -m $f --backend cuda $P > /dev/null 2> "$O/n/pp-profile.txt"
echo "== profile rc=$? $(el) s"; grep -A 14 "op  " "$O/n/pp-profile.txt" | head -16
# ncu of the prefill's tensor-core products (layer 0: q, k, v, o, then the experts' gate, up, down), the old kernel
# and the fragment-decoding one.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for fr in 0 1; do
  DS4_CUDA_GEMM_FRAG=$fr timeout 120 $NCU --clock-control none -k regex:"gemm_(f16|frag)_kernel" -c 7 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    "$B/ds4-bench" -m $f --backend cuda $P > "$O/n/ncu-gemm-frag$fr.txt" 2>&1
  echo "== ncu GEMM_FRAG=$fr rc=$? $(el) s"
  grep -E "gemm_(f16|frag)_kernel|Duration|Compute \(SM\)|Issue Slots Busy|Achieved Occupancy|No Eligible|Registers Per" "$O/n/ncu-gemm-frag$fr.txt" | head -60
done
export DS4_CUDA_L2_AHEAD=${AHEAD:-0}
OUT=$O/n timeout 240 bash bench/cuda-knockout.sh .gpurun; echo "== knockout (L2_AHEAD=$DS4_CUDA_L2_AHEAD) $(el) s"
tar czf "$O/call2.tgz" -C "$O" n && rm -rf "$O/n"
echo "all done $(el) s"
