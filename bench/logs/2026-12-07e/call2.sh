#!/bin/bash
# Session 2026-12-07e, second call: branch work = main + gpu-pending's four patches (bench/logs/2026-12-07b/
# gpu-pending: SlotPool's staged step inputs/outputs, the Q6_K down staging) + the windows' swap default, never run
# on a GPU before. Packed here with `bash bench/cuda-correctness.sh --pack build-cuda` (glm-routed.gguf moved aside)
# and `bash bench/pipeline-h200.sh --pack build-cuda`; carry [".gpurun", ".gpurun-pipe"].
# 1) the pipeline's decode with MPS, hop queues slept on and polled (issue 12: 0.93 of one process before);
# 2) the model suites that replay recorded steps (Qwen3, DeepSeek V4, GLM-5 stage pools), the Qwen3 suite and the
#    MoE ops tests again with DS4_CUDA_DOWN_STAGE=1.
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi -L
part() { local name=$1; shift; mkdir -p "$O/$name"; OUT=$O/$name "$@" > "$O/$name/stdout.txt" 2>&1; echo "== $name rc=$? $(el) s"; tail -12 "$O/$name/stdout.txt"; }
cleanup() { pkill -f 'ds4 -m /tmp/flash8' ; echo quit | nvidia-cuda-mps-control 2>/dev/null; pkill -f nvidia-cuda-mps; sleep 1; }
part pipe-mps env PIPE_PREFILL=0 PIPE_MPS=1 timeout 80 bash bench/pipeline-h200.sh .gpurun-pipe
cleanup
part pipe-mps-spin env PIPE_PREFILL=0 PIPE_MPS=1 DS4_PIPELINE_SPIN=1 timeout 80 bash bench/pipeline-h200.sh .gpurun-pipe
cleanup
part tests env DS4_CUDA_TESTS="cudabackend_dsv4_model_test cudabackend_glm_dsa_model_test cudabackend_model_test" \
  DS4_CUDA_GROUPED_AB=0 DS4_CUDA_MMA_AB=0 timeout 200 bash bench/cuda-correctness.sh .gpurun tests
grep -h -E "rc=|PASSED|FAILED" "$O"/tests/cudabackend_*.txt
part stage env DS4_CUDA_DOWN_STAGE=1 DS4_CUDA_TESTS="cudabackend_model_test" DS4_CUDA_GROUPED_AB=0 DS4_CUDA_MMA_AB=0 \
  timeout 120 bash bench/cuda-correctness.sh .gpurun tests
grep -h -E "rc=|PASSED|FAILED" "$O"/stage/cudabackend_*.txt
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C "$B"
DS4_CUDA_DOWN_STAGE=1 LD_LIBRARY_PATH=$B timeout 100 "$B/cudabackend_ops_test" --gtest_filter='*Moe*:*Expert*' > "$O/stage/ops-moe.txt" 2>&1
echo "== ops Moe (DOWN_STAGE=1) rc=$? $(el) s"; grep -E "PASSED|FAILED" "$O/stage/ops-moe.txt"
for d in pipe-mps pipe-mps-spin tests stage; do tar czf "$O/$d.tgz" -C "$O" "$d" && rm -rf "${O:?}/$d"; done
echo "all done $(el) s"
