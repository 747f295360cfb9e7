#!/bin/bash
# A CUDA test that fails at one seed, rerun at that seed with each of the backend's A/B switches flipped: a
# switch whose run passes names the path the failure lives on. Runs on the GPU machine over a pack of
# `bash bench/cuda-correctness.sh --pack BUILD` (carry .gpurun):
#   bash bench/cuda-seed-bisect.sh PACK_DIR TEST_BINARY GTEST_FILTER SEED
# e.g. bash bench/cuda-seed-bisect.sh .gpurun cudabackend_dsv4_model_test '*BatchedSequencesMatchCpuAlone*' \
#        12829905755645760577
# Prints one line a setting: the switch, PASS or FAIL, and the test's failure lines.
set -u
src=$(cd "${1:?PACK_DIR}" && pwd); bin=${2:?TEST_BINARY}; filter=${3:?GTEST_FILTER}; seed=${4:?SEED}
B=$(mktemp -d); xz -dc "$src/pk.tar.xz" | tar xf - -C "$B"; export LD_LIBRARY_PATH=$B DS4_BIN=$B
settings=("" DS4_CUDA_MOE_GROUPED=0 DS4_CUDA_MOE_GROUPED=1 DS4_CUDA_MOE_FUSED=0 DS4_CUDA_MOE_SPLIT=0
          DS4_CUDA_ATTN_GQA=0 DS4_CUDA_MATVEC_MB=0 DS4_CUDA_MATVEC_NR=1 DS4_CUDA_PDL=0)
for s in "${settings[@]}"; do
    out=$(cd "$B" && env $s DS4_TEST_SEED="$seed" timeout 120 "./$bin" --gtest_filter="$filter" 2>&1)
    rc=$?
    verdict=PASS; [ $rc -eq 0 ] || verdict="FAIL (rc $rc)"
    printf '%-24s %s %s\n' "${s:-defaults}" "$verdict" \
        "$(grep -E 'Expected|actual|sequence [0-9]' <<<"$out" | tr '\n' ' ' | cut -c1-160)"
done
