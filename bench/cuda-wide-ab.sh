#!/bin/bash
# Device call for the wide Q4_K decode matvec (quant_matmul.cu matvec_q4k_wide_kernel, DS4_CUDA_MATVEC_WIDE=1,
# issue 9/13): the op and model test binaries with the knob on (the Matmul cases hold a batch equal to each row
# alone and every row to the CPU), memcheck of the Matmul op tests with it, then ds4-bench decode of the
# Qwen3-30B-A3B-shaped q4_k_m file at ctx 512 for N = 1, 8, 32 sequences, on and off interleaved.
#
# Here: bash bench/cuda-split-ab.sh --pack build     (.gpu/split.tar.xz, .gpu/q4km.gguf)
# There (carry [".gpu"]): bash bench/cuda-wide-ab.sh .gpu   (output under $OUT, summary on stdout)
set -u
src=$(cd "${1:?usage: bench/cuda-wide-ab.sh FOLDER}" && pwd)
source "$(dirname "$0")/cuda-ab-common.sh"
ab_setup
ab_tests "wide" "DS4_CUDA_MATVEC_WIDE=1" '*Matmul*'
echo "== ds4-bench decode ($(( $(date +%s) - T0 )) s): w wide matvec, d defaults" >> "$O/summary.txt"
w=(--ctx-start 512 --ctx-max 512 --step-incr 1)
for n in 1 8 32; do
  p=(); [ $n -gt 1 ] && p=(--parallel $n)
  ab_run w$n "DS4_CUDA_MATVEC_WIDE=1" "${w[@]}" "${p[@]}"; ab_run d$n "DS4_NONE=1" "${w[@]}" "${p[@]}"
  ab_run w$n-b "DS4_CUDA_MATVEC_WIDE=1" "${w[@]}" "${p[@]}"; ab_run d$n-b "DS4_NONE=1" "${w[@]}" "${p[@]}"
done
echo "== done ($(( $(date +%s) - T0 )) s)" >> "$O/summary.txt"
tar cJf "$O/logs.tar.xz" -C "$W" . ; cat "$O/summary.txt"
