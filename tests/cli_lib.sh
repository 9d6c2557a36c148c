# cli_lib.sh - what the CLI test scripts share: setup of a work directory and the
# tcase/fail/run/want_rc/has helpers. Sourced after DCR (and NAME, the work
# directory's prefix) are set.

if [ ! -x "$DCR" ]; then
  echo "not ok - setup: $DCR is not an executable file"
  echo "0 passed, 1 failed"
  exit 1
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-$NAME.XXXXXX") || exit 3
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT TERM
cd "$W" || exit 3

PASS=0 FAIL=0 WHY= RC=0
# tcase NAME FUNCTION ARGS...: FUNCTION calls fail (the first reason is kept).
tcase() {
  local name=$1
  shift
  WHY=
  "$@"
  if [ -z "$WHY" ]; then PASS=$((PASS + 1)); echo "ok - $name"
  else FAIL=$((FAIL + 1)); echo "not ok - $name: $WHY"; fi
}
fail() { [ -n "$WHY" ] || WHY=$*; return 1; }
# run [< FILE] ARGS: dcr with stdout in o, stderr in e, exit status in RC.
run() { "$DCR" "$@" >o 2>e; RC=$?; }
shown() { head -c 300 "$1" | tr '\n' '|'; }
want_rc() { [ "$RC" = "$1" ] || fail "$2: exit $RC, expected $1; stderr: $(shown e)"; }
# has FILE TEXT WHAT: FILE holds the fixed string TEXT.
has() { grep -qF -- "$2" "$1" || fail "$3: no \"$2\" in $1: $(shown "$1")"; }
# jget FILE EXPR: a value from the JSON document in FILE (python expression on j).
jget() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

