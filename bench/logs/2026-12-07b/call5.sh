#!/bin/bash
# For the call after session 2026-12-07b (this session ran out of device time before it): on the staged-step-io
# branch, a recorded step's inputs in one page-locked block copied in by the graph, a stage's hidden rows copied
# out by it (issue 12): the pipeline's decode with MPS (hop queues slept on, then polled: DS4_PIPELINE_SPIN=1) and
# without, and the model suites that replay recorded steps (CUDA model, DeepSeek V4 and GLM-5 stage pools against
# the whole model). Pack first: bash bench/cuda-correctness.sh --pack build-cuda; bash bench/pipeline-h200.sh --pack
# build-cuda; move .gpurun/glm-routed.gguf aside (carry .gpurun and .gpurun-pipe: 64 MiB).
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi -L
part() { local name=$1; shift; mkdir -p "$O/$name"; OUT=$O/$name "$@" > "$O/$name/stdout.txt" 2>&1; echo "== $name rc=$? $(el) s"; tail -12 "$O/$name/stdout.txt"; }
cleanup() { pkill -f 'ds4 -m /tmp/flash8' ; pkill -f nvidia-cuda-mps; sleep 1; }
part pipe-mps env PIPE_PREFILL=0 PIPE_MPS=1 timeout 80 bash bench/pipeline-h200.sh .gpurun-pipe
cleanup
part pipe-mps-spin env PIPE_PREFILL=0 PIPE_MPS=1 DS4_PIPELINE_SPIN=1 timeout 80 bash bench/pipeline-h200.sh .gpurun-pipe
cleanup
part tests env DS4_CUDA_TESTS="cudabackend_dsv4_model_test cudabackend_glm_dsa_model_test cudabackend_model_test" \
  DS4_CUDA_GROUPED_AB=0 DS4_CUDA_MMA_AB=0 timeout 170 bash bench/cuda-correctness.sh .gpurun tests
grep -h -E "rc=|PASSED|FAILED" "$O"/tests/cudabackend_*.txt
part pipe-nomps env PIPE_PREFILL=0 timeout 80 bash bench/pipeline-h200.sh .gpurun-pipe
cleanup
for d in pipe-mps pipe-mps-spin pipe-nomps tests; do tar czf "$O/$d.tgz" -C "$O" "$d" && rm -rf "${O:?}/$d"; done
echo "all done $(el) s"
