#!/bin/bash
# The routed experts on the int8 tensor cores (moe_split_mma.cu) in one device call: their tests, batched decode
# of each kernel and layout against the per-pair split kernels (the default), and ncu's sections of the fastest
# guess. Everything lands in ONE tarball under $OUT (a call brings back only a few files).
#
# Here: bash bench/cuda-correctness.sh --pack build      (.gpurun/pk.tar.xz, q4km.gguf, glm-routed.gguf)
#       cp bench/cuda-ncu-step.sh bench/ncu_step_table.py .gpurun/
# There (carry [".gpurun"]): bash bench/moe-mma-sweep.sh .gpurun [tests|bench|ncu ...]   (default all three)
# Output: $OUT/moe-mma.tgz (tests/, decode/<variant>/, ncu/), and a summary on stdout.
# Time on an H100: tests ~2 min (the MoE ops tests and the model suite with each kernel), decode ~15 s a variant,
# ncu ~1.5 min.
set -u
src=$(cd "${1:?usage: bench/moe-mma-sweep.sh FOLDER-WITH-pk.tar.xz [tests|bench|ncu ...]}" && pwd); shift
what=${*:-tests bench ncu}
repo=$(cd "$(dirname "$0")/.." && pwd)
O=${OUT:-/tmp/out}; W=$(mktemp -d); mkdir -p "$O"
T0=$(date +%s); say() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a "$W/summary.txt"; }
nvidia-smi -L > "$W/env.txt" 2>&1
for part in $what; do
  case $part in
    tests)
      # The MoE ops tests and the model suite with each tensor-core kernel (cuda-correctness.sh's MMA block),
      # without the other binaries.
      DS4_CUDA_TESTS="cudabackend_ops_test" DS4_CUDA_GROUPED_AB=0 OUT=$W/tests \
        timeout 300 bash "$repo/bench/cuda-correctness.sh" "$src" tests > "$W/tests.txt" 2>&1
      say "tests rc=$?"; grep -hE "rc=|^\[  (PASSED|FAILED) " "$W"/tests/cudabackend_*.txt | tee -a "$W/summary.txt"
      ;;
    bench)
      # variant = "MMA STREAM WARPS WK GPW"
      for v in "0 0 8 0,0 0" "1 0 8 0,0 0" "1 1 8 0,0 0" "1 1 4 0,0 0" "1 1 8 0,0 2" "1 1 8 0,0 4"; do
        read -r mma st nw wk gpw <<< "$v"; name=mma$mma-s$st-w$nw-wk$wk-g$gpw
        DS4_CUDA_MOE_MMA=$mma DS4_CUDA_MOE_MMA_STREAM=$st DS4_CUDA_MOE_MMA_WARPS=$nw DS4_CUDA_MOE_MMA_WK=$wk \
          DS4_CUDA_MOE_MMA_GPW=$gpw OUT=$W/decode/$name timeout 90 bash "$repo/bench/parallel-decode.sh" "$src" 1 8 \
          > "$W/decode-$name.txt" 2>&1
        say "$name: $(grep -E '^\| (1|8) \| 512 ' "$W/decode-$name.txt" | awk -F'|' '{printf "N=%s %s t/s; ", $2, $5}')"
      done
      ;;
    ncu)
      for st in 0 1; do
        DS4_CUDA_MOE_MMA=1 DS4_CUDA_MOE_MMA_STREAM=$st DS4_NCU_MODES=float OUT=$W/ncu/steps$st \
          timeout 100 bash "$src/cuda-ncu-step.sh" 8 > "$W/ncu-steps$st.txt" 2>&1
        say "ncu step table (stream=$st): ncu-steps$st.txt"
      done
      DS4_CUDA_MOE_MMA=1 DS4_CUDA_MOE_MMA_STREAM=1 DS4_NCU_MODES='' DS4_NCU_DETAIL_N=8 \
        DS4_NCU_DETAIL_KERNELS="expert_split_mma|swiglu_split|moe_tile_list" DS4_NCU_DETAIL_COUNT=24 OUT=$W/ncu/detail \
        timeout 120 bash "$src/cuda-ncu-step.sh" 8 > "$W/ncu-detail.txt" 2>&1
      say "ncu detail: ncu/detail/ncu-detail-8.txt"
      ;;
    *) echo "moe-mma-sweep: unknown part '$part' (tests, bench or ncu)" >&2; exit 2 ;;
  esac
done
find "$W" -name '*.csv' -size +2M -delete  # ncu's raw tables of whole runs: the summaries keep what matters
tar czf "$O/moe-mma.tgz" -C "$W" . && say "wrote $O/moe-mma.tgz"
