#!/bin/bash
# End-of-step device call for the split MoE pair and the register bounds (issue 9): the CUDA op and model test
# binaries on the defaults, compute-sanitizer memcheck of the Matmul and MoE op tests, then ds4-bench decode of the
# Qwen3-30B-A3B-shaped q4_k_m file at ctx 512 for N = 1, 8, 32 sequences, interleaved: the defaults and the
# kernels before this session's work (DS4_CUDA_MATVEC_MB=0 DS4_CUDA_SPLIT_MB=0,0 DS4_CUDA_MOE_SPLIT=0); at N = 8
# also the split pair without the bounds (DS4_CUDA_MATVEC_MB=0 DS4_CUDA_SPLIT_MB=0,0).
#
# Here: bash bench/cuda-split-ab.sh --pack build     (.gpu/split.tar.xz, .gpu/q4km.gguf)
# There (carry [".gpu"]): bash bench/cuda-split-final.sh .gpu   (output under $OUT, summary on stdout)
set -u
src=$(cd "${1:?usage: bench/cuda-split-final.sh FOLDER}" && pwd)
source "$(dirname "$0")/cuda-ab-common.sh"
ab_setup
ab_tests "" "" '*Moe*:*Matmul*'
echo "== ds4-bench decode ($(( $(date +%s) - T0 )) s): d defaults, u split unbounded, o before" >> "$O/summary.txt"
w=(--ctx-start 512 --ctx-max 512 --step-incr 1)
for n in 1 8 32; do
  p=(); [ $n -gt 1 ] && p=(--parallel $n)
  ab_run d$n "DS4_NONE=1" "${w[@]}" "${p[@]}"
  [ $n = 8 ] && ab_run u$n "DS4_CUDA_MATVEC_MB=0 DS4_CUDA_SPLIT_MB=0,0" "${w[@]}" "${p[@]}"
  ab_run o$n "DS4_CUDA_MATVEC_MB=0 DS4_CUDA_SPLIT_MB=0,0 DS4_CUDA_MOE_SPLIT=0" "${w[@]}" "${p[@]}"
done
echo "== done ($(( $(date +%s) - T0 )) s)" >> "$O/summary.txt"
tar cJf "$O/logs.tar.xz" -C "$W" . ; cat "$O/summary.txt"
