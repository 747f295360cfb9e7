#!/usr/bin/env bash
# `ds4-server` command lines: every bad one exits 2 with exactly one stderr
# line ("ds4-server: <problem>") before any model is loaded; a file that is
# not a model exits 1 with one sentence; --help and --version exit 0.
set -u
: "${DS4_BIN:?DS4_BIN must name the build directory}"
S="$DS4_BIN/ds4-server"
WORK=$(mktemp -d /tmp/ds4_server_args.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
[ -x "$S" ] || { echo "FAIL: $S is not built"; exit 1; }
MODEL="$WORK/model.gguf"
printf 'GGUF' >"$MODEL"
printf 'k1\n# a comment\n\nk2\n' >"$WORK/keys"
printf 'bad key\n' >"$WORK/badkeys"
: >"$WORK/nokeys"

run() {  # WANT DESCRIPTION ARGS...
    local want=$1 what=$2
    shift 2
    timeout 60 "$S" "$@" </dev/null >"$WORK/out" 2>"$WORK/err"
    local rc=$?
    [ "$rc" -lt 128 ] || { fail "$what: killed by signal $((rc - 128))"; return; }
    [ "$rc" -eq "$want" ] || { fail "$what: exit $rc, wanted $want: $(head -c 300 "$WORK/err")"; return; }
    if [ "$want" -ne 0 ]; then
        [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "$what: not one stderr line: $(head -c 300 "$WORK/err")"
        grep -q '^ds4-server: .' "$WORK/err" || fail "$what: no 'ds4-server: ' prefix: $(head -c 200 "$WORK/err")"
    fi
}

run 0 "--help" --help
grep -q "/v1/chat/completions" "$WORK/out" || fail "--help does not list the endpoints"
run 0 "--version" --version
run 2 "unknown option" -m "$MODEL" --frobnicate
run 2 "stray argument" -m "$MODEL" extra
run 2 "missing model" -m "$WORK/absent.gguf"
run 2 "port 0" -m "$MODEL" --port 0
run 2 "port too big" -m "$MODEL" --port 70000
run 2 "port not a number" -m "$MODEL" --port http
run 2 "parallel 0" -m "$MODEL" --parallel 0
run 2 "ctx 1" -m "$MODEL" --ctx 1
run 2 "threads 0" -m "$MODEL" -t 0
run 2 "negative queue" -m "$MODEL" --max-queue -1
run 2 "body limit 0" -m "$MODEL" --max-body-mb 0
run 2 "bad backend" -m "$MODEL" --backend metal
run 2 "bad chat template" -m "$MODEL" --chat-template chatml
run 2 "empty host" -m "$MODEL" --host ""
run 2 "key with a space" -m "$MODEL" --api-key "a b"
run 2 "missing key file" -m "$MODEL" --api-key-file "$WORK/absent"
run 2 "bad key in file" -m "$MODEL" --api-key-file "$WORK/badkeys"
run 2 "empty key file" -m "$MODEL" --api-key-file "$WORK/nokeys"
run 2 "value missing" -m "$MODEL" --port
run 2 "negative shutdown timeout" -m "$MODEL" --shutdown-timeout -1
run 2 "shutdown timeout not a number" -m "$MODEL" --shutdown-timeout soon
run 2 "cors not an origin" -m "$MODEL" --cors example.com
run 2 "cors origin with a path" -m "$MODEL" --cors https://example.com/
run 2 "cors * and an origin" -m "$MODEL" --cors '*' --cors https://example.com
ram_gib=$(awk '/^MemTotal:/ {print int($2 / 1048576)}' /proc/meminfo)
run 2 "simulated use negative" -m "$MODEL" --ssd-streaming --simulate-used-memory -2GB
run 2 "simulated use over the RAM" -m "$MODEL" --ssd-streaming --simulate-used-memory "$((ram_gib + 1))GB"
grep -q -- "--simulate-used-memory .* RAM" "$WORK/err" || fail "simulated use over the RAM: $(cat "$WORK/err")"
run 2 "simulated use without streaming" -m "$MODEL" --simulate-used-memory 1GB
grep -q -- "--simulate-used-memory needs --ssd-streaming" "$WORK/err" || fail "simulated use without streaming: $(cat "$WORK/err")"
run 2 "int8 activations on the cpu" -m "$MODEL" --backend cpu --int8-activations
grep -q -- "--int8-activations is a CUDA mode" "$WORK/err" || fail "int8 activations on the cpu: $(cat "$WORK/err")"
run 2 "exact with int8 activations" -m "$MODEL" --exact --int8-activations
grep -q -- "--exact and --int8-activations contradict" "$WORK/err" || fail "exact with int8 activations: $(cat "$WORK/err")"
run 2 "certificate without key" -m "$MODEL" --ssl-cert-file "$WORK/keys"
run 2 "key without certificate" -m "$MODEL" --ssl-key-file "$WORK/keys"
run 2 "unreadable certificate" -m "$MODEL" --ssl-cert-file "$WORK/absent.pem" --ssl-key-file "$WORK/keys"
# Readable but not PEM: refused by the TLS layer, still before the model is read.
run 2 "certificate not PEM" -m "$MODEL" --ssl-cert-file "$WORK/keys" --ssl-key-file "$WORK/keys"
grep -q "ssl-cert-file" "$WORK/err" || fail "a certificate that is not PEM: $(cat "$WORK/err")"
# The listener starts before the load (GET /health: 503 loading): a free port.
source "$(dirname "$0")/free_port.sh"
port=$(free_port)
run 1 "not a model" -m "$MODEL" --backend cpu --api-key-file "$WORK/keys" --port "$port"
grep -qi "gguf\|model" "$WORK/err" || fail "a broken model's sentence does not say what is wrong: $(cat "$WORK/err")"
# A port another ds4-server holds (listening while it loads): exit 1 with
# one sentence, not a second listener sharing the port.
DS4_TEST_LOAD_DELAY_MS=20000 "$S" -m "$MODEL" --backend cpu --port "$port" </dev/null >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 503 ] && break
    sleep 0.05
done
run 1 "port in use" -m "$MODEL" --backend cpu --port "$port"
grep -q "cannot listen" "$WORK/err" || fail "a port in use: $(cat "$WORK/err")"
kill -9 "$holder"
wait "$holder" 2>/dev/null

# --int8-activations on a real model: with the default backend it serves
# (a CPU-only build says the flag is a CUDA mode and stays exact; a CUDA
# build decodes on 8-bit activations), and the backend line says which.
"$DS4_BIN/ds4-gguf" synth --arch qwen3moe --preset tiny --out "$WORK/q.gguf" >/dev/null 2>&1 || fail "synth"
"$S" -m "$WORK/q.gguf" -t 2 --ctx 64 --parallel 1 --port "$port" --int8-activations </dev/null >/dev/null 2>"$WORK/int8" &
server=$!
for _ in $(seq 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
reply=$(curl -s "http://127.0.0.1:$port/v1/completions" -d '{"prompt":"x","max_tokens":2}')
case "$reply" in *'"text_completion"'*) ;; *) fail "--int8-activations: no completion: $reply $(head -c 300 "$WORK/int8")" ;; esac
grep -Eq "backend: (cuda .*8-bit decode activations|cpu.*--int8-activations is a CUDA mode)" "$WORK/int8" \
    || fail "--int8-activations: the backend line does not say it: $(grep backend "$WORK/int8")"
kill -TERM "$server"
wait "$server" || fail "--int8-activations: exit status $? after SIGTERM"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "server args: ok"
