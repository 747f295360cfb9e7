#!/bin/bash
# Session 2026-12-07b call 1: the tensor-core experts' decode sweep (issue 9), the pipeline's decode with and
# without MPS and gRPC's round trip alone with and without spinning queues (issue 12), the tensor-core experts' tests (ncu in a later call). Each part lands in its own folder under $OUT
# as soon as it ends (a call past its limit still brings back the parts that finished).
set -u
O=${OUT:-/tmp/out}; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi -L
part() { local name=$1; shift; mkdir -p "$O/$name"; OUT=$O/$name "$@" > "$O/$name/stdout.txt" 2>&1; echo "== $name rc=$? $(el) s"; tail -12 "$O/$name/stdout.txt"; }
part sweep-bench timeout 220 bash bench/moe-mma-sweep.sh .gpurun bench
part grpc-hop env PIPE_HOP_ONLY="0 2000" timeout 60 bash bench/pipeline-h200.sh .gpurun-pipe
part pipe-nomps env PIPE_PREFILL=0 timeout 100 bash bench/pipeline-h200.sh .gpurun-pipe
cleanup() { pkill -f 'ds4 -m /tmp/flash8' ; pkill -f nvidia-cuda-mps; sleep 1; }
cleanup
part pipe-mps env PIPE_PREFILL=0 PIPE_MPS=1 timeout 100 bash bench/pipeline-h200.sh .gpurun-pipe
cleanup
for d in pipe-nomps pipe-mps; do tar czf "$O/$d.tgz" -C "$O" "$d" && rm -rf "${O:?}/$d"; done
part sweep-tests timeout 150 bash bench/moe-mma-sweep.sh .gpurun tests
echo "all done $(el) s"
