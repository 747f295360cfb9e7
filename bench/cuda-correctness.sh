#!/bin/bash
# CUDA backend v1 correctness run on the GPU machine (see bench/NOTES.md).
cd "$(dirname "$0")"
export DS4_BIN=$PWD DS4_CUDA_TEST_Q4KM=$PWD/q4km.gguf
O=${OUT:-/tmp/out}; mkdir -p $O
{ nvidia-smi -L; nvcc --version | tail -1; ldd ./cudabackend_ops_test | grep -E "cublas|cudart|pcre|not found"; } > $O/env.txt 2>&1
./cudabackend_ops_test > $O/ops.log 2>&1; echo "rc=$?" >> $O/ops.log
./cudabackend_model_test > $O/model.log 2>&1; echo "rc=$?" >> $O/model.log
for b in cpu cuda; do ./ds4 --backend $b -m q4km.gguf --token-ids ids.txt --dump-logits $O/ds4-$b.bin > $O/ds4-$b.log 2>&1; echo "rc=$?" >> $O/ds4-$b.log; done
python3 -c "import numpy as n;a=n.fromfile('$O/ds4-cpu.bin','f4').reshape(12,-1);b=n.fromfile('$O/ds4-cuda.bin','f4').reshape(12,-1);print('ds4 cli cpu vs cuda max rel l2',max(n.linalg.norm(a[i]-b[i])/n.linalg.norm(a[i]) for i in range(12)))" > $O/ds4-compare.txt 2>&1
timeout 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./cudabackend_ops_test > $O/memcheck-ops.log 2>&1; echo "rc=$?" >> $O/memcheck-ops.log
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 ./cudabackend_model_test --gtest_filter='*q4_k_m*' > $O/memcheck-model.log 2>&1; echo "rc=$?" >> $O/memcheck-model.log
