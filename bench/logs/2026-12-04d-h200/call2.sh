#!/bin/bash
# Session 2026-12-04d call 2 (one H200; two were asked for and not lent): the pipeline with both stages on the GPU
# (bench/pipeline-h200.sh, now with the step timing of each stage), after ncu's duration of every kernel of one replayed decode step (GLM-5 q2 8 blocks, Qwen3-30B-A3B q4_k_m).
set -u
R=$PWD; O=${OUT:-/tmp/out}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi -L
B=$(mktemp -d); xz -dc .gpurun/pk.tar.xz | tar xf - -C $B
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
(
  export LD_LIBRARY_PATH=$B CUDA_VISIBLE_DEVICES=0
  $B/ds4-gguf synth --arch glm-dsa --preset glm5 --quant q2 --n-layer 8 --no-tokenizer --seed 1 --out /dev/shm/g.gguf > $O/synth-g.txt 2>&1
  $B/ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q4_k_m --seed 1 --no-tokenizer --out /dev/shm/q.gguf > $O/synth-q.txt 2>&1
  for m in g q; do
    timeout 200 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum,launch__grid_size \
      --csv --page raw $B/ds4-bench -m /dev/shm/$m.gguf --backend cuda --ctx-start 512 --ctx-max 512 --step-incr 1 \
      --gen-tokens 3 --prefill-chunk 512 > $O/ncu-$m.csv 2> $O/ncu-$m.log
    echo "== ncu $m rc=$? $(el) s"; python3 $R/bench/ncu_step_table.py $O/ncu-$m.csv 2 > $O/ncu-$m-step.txt; head -40 $O/ncu-$m-step.txt
  done
  xz -T4 $O/ncu-*.csv
) > $O/ncu.txt 2>&1
cat $O/ncu.txt
mkdir -p $O/pipe1
OUT=$O/pipe1 CUDA_VISIBLE_DEVICES=0 PIPE_GPUS=1 timeout 250 bash bench/pipeline-h200.sh .gpurun-pipe
echo "pipe1 $(el) s"
tar cf $O/pipe.tar -C $O pipe1 && rm -rf $O/pipe1
echo "all done $(el) s"
