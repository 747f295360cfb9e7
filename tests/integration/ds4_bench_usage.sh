# shellcheck shell=bash disable=SC2154
# Sourced by the ds4-bench integration tests (needs $bin, $tmp and fail()):
# expect_usage ARGS... — ds4-bench exits 2 with exactly one stderr line that
# names the program.
expect_usage() {
  set +e
  "$bin/ds4-bench" "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  set -e
  [[ $rc -eq 2 ]] || fail "ds4-bench $*: expected exit 2, got $rc: $(cat "$tmp/err")"
  [[ $(wc -l <"$tmp/err") -eq 1 ]] || fail "ds4-bench $*: expected one line, got: $(cat "$tmp/err")"
  grep -q "^ds4-bench: " "$tmp/err" || fail "ds4-bench $*: message lacks the program name: $(cat "$tmp/err")"
}
