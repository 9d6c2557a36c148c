# crash_lib.sh - what the kill -9 campaigns (crash_test.sh, crash_dir_test.sh,
# crash_history_test.sh) share: their two arguments, the seed of their random
# times, a work folder W removed at exit together with a process still running
# (PID), and die.
#
# usage, sourced:  . crash_lib.sh NAME DEFAULT_COUNT "$@"
# sets DCR (absolute), COUNT, SEED (RANDOM seeded with it: CRASH_SEED fixes it),
# W and PID (empty; a campaign sets it while its process runs).
CRASH_NAME=$1
DCR=${3:-build/dcr}
COUNT=${4:-$2}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
die() { echo "$CRASH_NAME: $*" >&2; exit 1; }
[ -x "$DCR" ] || die "$DCR is not an executable file"
case $COUNT in '' | *[!0-9]*) echo "$CRASH_NAME: COUNT must be a number" >&2; exit 2 ;; esac
SEED=${CRASH_SEED:-$(( $$ ^ $(date +%s) ))}
RANDOM=$SEED

W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-$CRASH_NAME.XXXXXX") || exit 3
PID=
crash_cleanup() {
  [ -n "$PID" ] && kill -9 "$PID" 2>/dev/null
  rm -rf "$W"
}
trap crash_cleanup EXIT
trap 'exit 130' INT TERM
