#!/usr/bin/env bash
# `ds4` command lines: every bad one exits 2 with exactly one stderr line
# ("ds4: <problem>") before any model is loaded, and never dies by a signal;
# a truncated or foreign model file exits 1 with one sentence.
set -u
: "${DS4_BIN:?DS4_BIN must name the build directory}"
DS4="$DS4_BIN/ds4"
GGUF_TOOL="$DS4_BIN/ds4-gguf"
WORK=$(mktemp -d /tmp/ds4_cli_args.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
SEED=${DS4_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
RANDOM=$((SEED % 32768))
echo "seed $SEED (rerun with DS4_TEST_SEED=$SEED)"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

[ -x "$DS4" ] || { echo "FAIL: $DS4 is not built"; exit 1; }

# A file that exists: flag checks come before the model is opened, so any
# regular file will do for the exit-2 matrix.
MODEL="$WORK/model.gguf"
printf 'GGUF' >"$MODEL"
printf 'hello' >"$WORK/prompt.txt"
printf '1 2 3' >"$WORK/ids.txt"

# run_ds4 WANT DESCRIPTION ARGS...: exit WANT, one stderr line "ds4: ...".
run_ds4() {
    local want=$1 what=$2
    shift 2
    timeout 60 "$DS4" "$@" </dev/null >"$WORK/out" 2>"$WORK/err"
    local rc=$?
    if [ "$rc" -eq 124 ]; then fail "$what: timed out"; return; fi
    if [ "$rc" -ge 128 ]; then fail "$what: killed by signal $((rc - 128))"; return; fi
    if [ "$rc" -ne "$want" ]; then fail "$what: exit $rc, wanted $want; stderr: $(head -c 300 "$WORK/err")"; return; fi
    if [ "$want" -ne 0 ]; then
        local lines
        lines=$(wc -l <"$WORK/err")
        [ "$lines" -eq 1 ] || fail "$what: $lines stderr lines, wanted exactly 1: $(head -c 300 "$WORK/err")"
        grep -q '^ds4: .' "$WORK/err" || fail "$what: stderr does not start with 'ds4: ': $(head -c 200 "$WORK/err")"
    fi
}

# usage DESCRIPTION NEEDLE ARGS...: exit 2 and the line mentions NEEDLE.
usage() {
    local what=$1 needle=$2
    shift 2
    run_ds4 2 "$what" "$@"
    grep -qF -- "$needle" "$WORK/err" || fail "$what: message does not name '$needle': $(head -c 200 "$WORK/err")"
}

M=(-m "$MODEL")
usage "unknown flag" "--bogus" "${M[@]}" --bogus
usage "unknown short flag" "-Z" "${M[@]}" -Z
usage "stray argument" "stray" "${M[@]}" stray
usage "missing value at end" "--ctx" "${M[@]}" -c
usage "missing value before flag" "--temp" "${M[@]}" --temp --top-p 0.5
usage "missing -sys value" "--system" "${M[@]}" -sys
usage "listen lacks port" "--listen" "${M[@]}" --role worker --layers 1:2 --coordinator 127.0.0.1 9 --listen 127.0.0.1
usage "threads not a number" "--threads" "${M[@]}" -t four
usage "threads zero" "--threads" "${M[@]}" -t 0
usage "threads negative" "--threads" "${M[@]}" -t -3
usage "ctx zero" "--ctx" "${M[@]}" -c 0
usage "ctx huge" "--ctx" "${M[@]}" -c 99999999999
usage "ctx fraction" "--ctx" "${M[@]}" -c 1.5
usage "prefill chunk zero" "--prefill-chunk" "${M[@]}" --prefill-chunk 0
usage "tokens below -1" "--tokens" "${M[@]}" -n -7
usage "temp negative" "--temp" "${M[@]}" --temp -0.5
usage "temp text" "--temp" "${M[@]}" --temp hot
usage "temp nan" "--temp" "${M[@]}" --temp nan
usage "top-p above 1" "--top-p must be in (0, 1], got 1.5" "${M[@]}" --top-p 1.5
usage "top-p zero" "--top-p" "${M[@]}" --top-p 0
usage "min-p above 1" "--min-p" "${M[@]}" --min-p 2
usage "top-k negative" "--top-k" "${M[@]}" --top-k -1
usage "seed negative" "--seed" "${M[@]}" --seed -1
usage "seed text" "--seed" "${M[@]}" --seed abc
usage "repeated flag" "--temp" "${M[@]}" --temp 1 --temp 2
usage "bad backend" "--backend" "${M[@]}" --backend metal
usage "bad role" "--role" "${M[@]}" --role leader
usage "bad layers" "--layers" "${M[@]}" --layers 5
usage "layers reversed" "--layers" "${M[@]}" --layers 9:3
usage "port zero" "--listen" "${M[@]}" --role coordinator --layers 0:1 --listen 0.0.0.0 0
usage "port too big" "--listen" "${M[@]}" --role coordinator --layers 0:1 --listen 0.0.0.0 65536
usage "coordinator port text" "--coordinator" "${M[@]}" --role worker --layers 1:2 --listen h 1 --coordinator h port
usage "bad expert cache" "--ssd-streaming-cache-experts" "${M[@]}" --ssd-streaming --ssd-streaming-cache-experts 5TB
# --simulate-used-memory: a size no larger than the RAM, checked before the
# model (MODEL is 4 bytes: a load would exit 1).
ram_gib=$(awk '/^MemTotal:/ {print int($2 / 1048576)}' /proc/meminfo)
usage "simulated use negative" "--simulate-used-memory" "${M[@]}" --ssd-streaming --simulate-used-memory -4GB
usage "simulated use not a size" "--simulate-used-memory" "${M[@]}" --ssd-streaming --simulate-used-memory lots
usage "simulated use without unit" "--simulate-used-memory" "${M[@]}" --ssd-streaming --simulate-used-memory 12
usage "simulated use over the RAM" "RAM" "${M[@]}" --ssd-streaming --simulate-used-memory "$((ram_gib + 1 + RANDOM % 64))GB"
usage "simulated use without streaming" "needs --ssd-streaming" "${M[@]}" --simulate-used-memory 1GB
usage "simulated use without value" "--simulate-used-memory" "${M[@]}" --ssd-streaming --simulate-used-memory
usage "missing model file" "$WORK/absent.gguf" -m "$WORK/absent.gguf" -p hi
usage "model is a directory" "--model" -m "$WORK" -p hi
usage "missing prompt file" "--prompt-file" "${M[@]}" --prompt-file "$WORK/absent.txt"
usage "missing token ids file" "--token-ids" "${M[@]}" --token-ids "$WORK/absent.txt" --dump-logits "$WORK/l.bin"
usage "prompt and prompt file" "--prompt-file" "${M[@]}" -p hi --prompt-file "$WORK/prompt.txt"
usage "dump without ids" "--dump-logits" "${M[@]}" --dump-logits "$WORK/l.bin"
usage "ids without dump" "--token-ids" "${M[@]}" --token-ids "$WORK/ids.txt"
usage "coordinator without layers" "--layers" "${M[@]}" --role coordinator
usage "worker without coordinator" "--coordinator" "${M[@]}" --role worker --layers 1:2
usage "coordinator without listen" "--listen" "${M[@]}" --role coordinator --layers 0:1
usage "coordinator not at block 0" "block 0" "${M[@]}" --role coordinator --layers 1:2 --listen 127.0.0.1 9000
usage "worker at block 0" "after block 0" "${M[@]}" --role worker --layers 0:2 --coordinator 127.0.0.1 9000
usage "worker with the head apart" "the head alone is the coordinator's" "${M[@]}" --role worker --layers 1:2,output --coordinator 127.0.0.1 9000
usage "coordinator through the head" "leaves no block" "${M[@]}" --role coordinator --layers 0:output --listen 127.0.0.1 9000
usage "the head twice in --layers" "--layers must be" "${M[@]}" --role coordinator --layers 0:1,output,output --listen 127.0.0.1 9000
usage "output alone" "--layers must be" "${M[@]}" --role coordinator --layers output --listen 127.0.0.1 9000
usage "off loopback without key" "cluster key" "${M[@]}" --role coordinator --layers 0:1 --listen 0.0.0.0 9000
usage "layers without role" "--role" "${M[@]}" --layers 0:1
usage "bad activation bits" "--dist-activation-bits" "${M[@]}" --role coordinator --layers 0:1 --listen 127.0.0.1 9 --dist-activation-bits 12
usage "listen without role" "--role" "${M[@]}" --listen 0.0.0.0 9000
usage "coordinator address without role" "--role" "${M[@]}" --coordinator 10.0.0.1 9000
usage "cache without streaming" "--ssd-streaming" "${M[@]}" --ssd-streaming-cache-experts 64
usage "host weights on the cpu" "--cuda-host-weights" "${M[@]}" --cuda-host-weights
usage "host weights on the cpu, explicit" "--cuda-host-weights" "${M[@]}" --backend cpu --cuda-host-weights
usage "int8 activations on the cpu" "--int8-activations" "${M[@]}" --backend cpu --int8-activations
usage "exact with int8 activations" "contradict" "${M[@]}" --exact --int8-activations
usage "think and nothink" "--nothink" "${M[@]}" --think --nothink
usage "unknown chat template" "--chat-template must be one of" "${M[@]}" --chat-template chatml
usage "empty chat template" "--chat-template" "${M[@]}" --chat-template ""
usage "chat template with token ids" "--chat-template" "${M[@]}" --chat-template raw --token-ids "$WORK/ids.txt" --dump-logits "$WORK/l.bin"

# Random out-of-range numbers, fresh each run.
for _ in $(seq 5); do
    n=$(( 5000 + RANDOM * 3 ))
    usage "threads $n" "--threads" "${M[@]}" -t "$n"
    p=$(( 65536 + RANDOM ))
    usage "port $p" "--listen" "${M[@]}" --role coordinator --layers 0:1 --listen 127.0.0.1 "$p"
    t="-$((RANDOM % 100 + 1)).$((RANDOM % 10))"
    usage "temp $t" "--temp" "${M[@]}" --temp "$t"
done

# Help and version need no model.
run_ds4 0 "help" --help
grep -q "cuda" "$WORK/out" || fail "--help does not list the cuda backend"
grep -q "cpu" "$WORK/out" || fail "--help does not list the cpu backend"
grep -q -- "--chat-template NAME" "$WORK/out" || fail "--help does not list --chat-template"
run_ds4 0 "version" --version

# ---- bad model files: exit 1, one sentence ---------------------------------------
printf 'not a model, just some text\n' >"$WORK/text.gguf"
run_ds4 1 "text file as model" -m "$WORK/text.gguf" -p hi -n 1
if [ -x "$GGUF_TOOL" ]; then
    "$GGUF_TOOL" synth --arch qwen3moe --preset tiny --out "$WORK/tiny.gguf" --seed "$SEED" >/dev/null ||
        fail "ds4-gguf synth failed"
    size=$(stat -c %s "$WORK/tiny.gguf")
    for cut in 16 $((RANDOM * 100 % 5000000)) $((size / 2)) $((size - 1)); do
        head -c "$cut" "$WORK/tiny.gguf" >"$WORK/cut.gguf"
        run_ds4 1 "model truncated at byte $cut of $size" -m "$WORK/cut.gguf" -p hi -n 1
        grep -q "cut.gguf" "$WORK/err" || fail "truncated model: message does not name the file: $(cat "$WORK/err")"
    done
else
    fail "$GGUF_TOOL is not built (needed to make a truncated model)"
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s); seed $SEED"
    exit 1
fi
echo "ok"
