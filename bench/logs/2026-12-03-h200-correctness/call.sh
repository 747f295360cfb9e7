#!/bin/bash
# Session call 1: CUDA correctness of HEAD (all six CUDA test binaries, the forced MoE paths, GLM check incl. the CLI
# cuda-vs-cpu run) in parallel with compute-sanitizer memcheck of all six binaries.
set -u
R=$PWD; O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $W/c $W/g $W/m
cd .gpu && ln -sf all9.tar.xz pk.tar.xz && ln -sf all9.tar.xz glm.tar.xz && tar xJf all9.tar.xz ./glm-routed.gguf && cd $R
B=$(mktemp -d); xz -dc .gpu/all9.tar.xz | tar xf - -C $B
T0=$(date +%s)
( OUT=$W/c bash .gpu/cuda-correctness.sh .gpu tests > $W/c/summary.txt 2>&1; echo "correctness done $(( $(date +%s) - T0 )) s" >> $W/c/summary.txt ) &
( OUT=$W/g bash .gpu/cuda-glm-check.sh .gpu tests,run > $W/g/summary.txt 2>&1; echo "glm done $(( $(date +%s) - T0 )) s" >> $W/g/summary.txt ) &
( cd $B; export DS4_BIN=$B LD_LIBRARY_PATH=$B DS4_CUDA_TEST_Q4KM=$R/.gpu/q4km.gguf DS4_CUDA_TEST_GLM=$B/glm-routed.gguf
  for t in cudabackend_ops_test cudabackend_model_test cudabackend_dsv4_ops_test cudabackend_dsv4_model_test cudabackend_glm_dsa_ops_test cudabackend_glm_dsa_model_test; do
    ( timeout 520 compute-sanitizer --tool memcheck --error-exitcode 9 ./$t --gtest_filter='-*RealShape*:*LlamaGenerator*' > $W/m/memcheck-$t.txt 2>&1
      echo "memcheck $t rc=$? $(( $(date +%s) - T0 )) s" >> $W/m/memcheck-$t.txt ) &
  done; wait ) &
wait
{ nvidia-smi -L; cat $B/commit; echo "== correctness"; cat $W/c/summary.txt; echo "== glm"; cat $W/g/summary.txt; echo "== memcheck"; grep -hE "ERROR SUMMARY|rc=|^\[  (PASSED|FAILED) " $W/m/*.txt; } > $O/summary.txt 2>&1
tar cJf $O/logs.tar.xz -C $W . ; cat $O/summary.txt | head -150
