#!/bin/bash
# Batched decode with the MoE (and optionally the dense products) on the tensor cores, A/B in one device call:
# bench/parallel-decode.sh for each N given (default 8 16 32) under
#   default        the CUDA-core grouped kernels up to 512 pairs, matvec up to 64 rows
#   moe-tc         DS4_CUDA_MOE_DEVICE_PAIRS=32: more than 4 decode rows go to gemm_f16 over the device tile list
#   moe-dense-tc   and DS4_CUDA_DENSE_TC_TOKENS=16: dense products of 16+ rows on gemm_f16 too
# Here: bash bench/cuda-correctness.sh --pack build   There (carry [".gpurun"]): bash bench/moe-tc-decode-ab.sh .gpurun [N...]
# Output under $OUT/<config>/ (par-N.json, logs); one table per config on stdout.
set -u
src=${1:?usage: bench/moe-tc-decode-ab.sh FOLDER-WITH-pk.tar.xz [N...]}; shift
ns=${*:-8 16 32}
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/out}
for cfg in default moe-tc moe-dense-tc; do
  case $cfg in
    default) env=() ;;
    moe-tc) env=(DS4_CUDA_MOE_DEVICE_PAIRS=32) ;;
    moe-dense-tc) env=(DS4_CUDA_MOE_DEVICE_PAIRS=32 DS4_CUDA_DENSE_TC_TOKENS=16) ;;
  esac
  echo "== $cfg ${env[*]}"
  # shellcheck disable=SC2086
  env "${env[@]}" OUT="$O/$cfg" bash "$here/parallel-decode.sh" "$src" $ns
done
