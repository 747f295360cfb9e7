# Sourced by the ds4-server test scripts (ctest sets DS4_BIN and
# DS4_SOURCE_DIR): bin, src, deps, the run's seed (seed.sh: DS4_TEST_SEED, printed),
# fail (one line with the seed, then the server log's tail), a temporary
# folder removed at exit with any server still running, a free loopback
# port, and starting a server that is ready.
#   start_server ARGS...  ds4-server -m ... ARGS on $port (log in $tmp/log),
#                         returns once $base/health answers 200; sets pid
#                         (an HTTPS server: set base, and cacert to its CA)
#   stop_server           SIGTERM, then waits for the exit, which must be 0
bin=${DS4_BIN:?}
src=${DS4_SOURCE_DIR:?}
deps=${DS4_DEPS_DIR:-$src/.deps}
source "$(dirname "${BASH_SOURCE[0]}")/seed.sh"
fail() { echo "FAIL (seed $seed): $*" >&2; [ -f "$tmp/log" ] && tail -20 "$tmp/log" >&2; exit 1; }
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"  # free_port: outside the ephemeral range
port=$(free_port)
base=http://127.0.0.1:$port

start_server() {
  "$bin/ds4-server" --port "$port" "$@" >"$tmp/log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    [ "$(curl -s ${cacert:+--cacert "$cacert"} -o /dev/null -w '%{http_code}' "$base/health")" = 200 ] && return 0
    kill -0 "$pid" 2>/dev/null || fail "the server exited at start"
    sleep 0.1
  done
  fail "the server was not ready within a minute"
}

stop_server() {
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  pid=
  [ "$rc" = 0 ] || fail "exit status $rc after SIGTERM, not 0"
}
