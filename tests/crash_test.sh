#!/usr/bin/env bash
# crash_test.sh - kill -9 `dcr apply --in-place` at random moments, then check that
# running the same command again finishes the job (SPEC.md §18, dcr.h dcr_patch_file).
#
# usage: tests/crash_test.sh [path/to/dcr] [COUNT]     (defaults: build/dcr, 300)
#
# Makes a pair with `dcr synth` (CRASH_SIZE bytes, default 64M; 16M when COUNT < 50,
# to keep `make check` short), a second step of the same layout, and the bundles
# base->t1 and t1->t2. Then COUNT times: copies the base to a work file, starts
#   dcr apply --in-place WORK BUNDLE... [--no-sync] --verify full|chunk|none
# (the options and a single bundle or the series of two cycle from run to run),
# sleeps a random time between 0 and a clean run's duration, kill -9s it, and
# checks that
#   - right after the kill the work file is the base, t1 or t2, or a committed
#     journal lies beside it (the file is never changed but through one), and a
#     journal under its own name is always committed (it is renamed there then);
#   - the same command, run again, exits 0, leaves the expected target byte for
#     byte and no WORK.dcr-journal.
#   - a committed journal left by the kill is finished by the rerun, which says so.
# Prints one line per failure and a summary: runs, kills that landed mid-run
# (the process was still running) or after it had finished, kills that left a
# a committed journal or one under its temporary name, recoveries observed (the rerun printed
# "finished an apply that had been interrupted"), failures. CRASH_SEED fixes the random times. Exits 1 on any failure.
set -u

. "$(dirname "$0")/crash_lib.sh" crash_test 300 "$@"
if [ -n "${CRASH_SIZE:-}" ]; then SIZE=$CRASH_SIZE
elif [ "$COUNT" -lt 50 ]; then SIZE=16M
else SIZE=64M
fi

# ---- the checkpoints and bundles
# The base is the same for every rate (synth.h: the same seed, the same master
# weights), so t2 (rate 0.02) has t1's layout and t1->t2 is a second step.
"$DCR" synth "$W/base" "$W/t1" --size "$SIZE" --rate 0.01 --seed 7 -q --no-progress ||
  die "dcr synth failed"
"$DCR" synth "$W/base2" "$W/t2" --size "$SIZE" --rate 0.02 --seed 7 -q --no-progress ||
  die "dcr synth failed"
cmp -s "$W/base" "$W/base2" || die "dcr synth gave two bases for one seed"
rm -f "$W/base2"
"$DCR" encode "$W/base" "$W/t1" -o "$W/b1.dcr" -q --no-progress || die "dcr encode failed"
"$DCR" encode "$W/t1" "$W/t2" -o "$W/b2.dcr" -q --no-progress || die "dcr encode failed"

WORK=$W/work
JOURNAL=$WORK.dcr-journal

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Configuration c (0..11): bit 0 --no-sync; (c >> 1) % 3 the level, full, chunk or
# none; c >= 6 the series.
LEVELS=(full chunk none)
config_args() {
  local c=$1
  ARGS=("$WORK" "$W/b1.dcr")
  EXPECT=$W/t1
  if (( c >= 6 )); then ARGS+=("$W/b2.dcr"); EXPECT=$W/t2; fi
  ARGS+=(--verify "${LEVELS[(c >> 1) % 3]}")
  if (( c & 1 )); then ARGS+=(--no-sync); fi
  ARGS+=(--no-progress)
}

# ---- a clean run of each configuration: its duration bounds the kill times
declare -a DURATION
for c in 0 1 2 3 4 5 6 7 8 9 10 11; do
  config_args "$c"
  cp "$W/base" "$WORK" || die "cannot copy the base"
  t0=$(now_ms)
  "$DCR" apply --in-place "${ARGS[@]}" -q || die "clean run of configuration $c failed"
  DURATION[c]=$(( $(now_ms) - t0 ))
  cmp -s "$WORK" "$EXPECT" || die "clean run of configuration $c did not give the target"
  [ -e "$JOURNAL" ] && die "clean run of configuration $c left a journal"
done
echo "crash_test: $COUNT runs, $SIZE checkpoints, seed $SEED; clean runs take" \
     "${DURATION[*]} ms (configurations 0-11: bit 0 --no-sync, (c >> 1) % 3 full/chunk/none, c >= 6 series)"

runs=0 mid=0 after=0 committed_journals=0 uncommitted_journals=0 recoveries=0 failures=0
fail() {
  failures=$((failures + 1))
  echo "not ok - run $runs (configuration $1, killed after $2 ms, $3): $4"
}

for ((i = 0; i < COUNT; i++)); do
  c=$(( i % 12 ))
  config_args "$c"
  cp "$W/base" "$WORK" || die "cannot copy the base"
  rm -f "$JOURNAL" "$JOURNAL.tmp"
  d=${DURATION[c]}
  ms=$(( (RANDOM * 32768 + RANDOM) % (d + 1) ))
  "$DCR" apply --in-place "${ARGS[@]}" -q 2>"$W/killed.err" &
  PID=$!
  sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
  kill -9 "$PID" 2>/dev/null
  { wait "$PID"; } 2>/dev/null # no "Killed" line from the shell
  status=$?
  PID=
  runs=$((runs + 1))
  if [ "$status" -eq 137 ]; then how="mid-run"; mid=$((mid + 1))
  elif [ "$status" -eq 0 ]; then how="after it finished"; after=$((after + 1))
  else fail "$c" "$ms" "exit $status" "the run failed before the kill: $(head -c 300 "$W/killed.err")"; continue
  fi
  # Right after the kill: a known state, or a committed journal that finishes it
  # (its trailer, SPEC.md §18, ends in the magic "DCJEND\r\n" + 24 bytes).
  # A journal under its own name is whole: it is renamed there once committed
  # (R-JNL-2); one being written has the temporary name, and goes on the rerun.
  committed=0
  if [ -e "$JOURNAL" ]; then
    if [ "$(tail -c 32 "$JOURNAL" | head -c 6 | tr -d '\000')" = DCJEND ]; then
      committed=1 committed_journals=$((committed_journals + 1))
    else
      fail "$c" "$ms" "$how" "a journal under its own name is not committed"
    fi
  fi
  [ -e "$JOURNAL.tmp" ] && uncommitted_journals=$((uncommitted_journals + 1))
  if [ "$committed" = 0 ] && ! cmp -s "$WORK" "$W/base" && ! cmp -s "$WORK" "$W/t1" &&
     ! cmp -s "$WORK" "$W/t2"; then
    fail "$c" "$ms" "$how" "the file is none of base, t1, t2 and no committed journal lies beside it"
  fi
  # The same command again finishes the job.
  if ! "$DCR" apply --in-place "${ARGS[@]}" 2>"$W/rerun.err"; then
    fail "$c" "$ms" "$how" "the rerun failed: $(head -c 300 "$W/rerun.err")"
    continue
  fi
  if grep -q "finished an apply that had been interrupted" "$W/rerun.err"; then
    recoveries=$((recoveries + 1))
  elif [ "$committed" = 1 ]; then
    fail "$c" "$ms" "$how" "a committed journal was left, and the rerun did not say it finished it"
  fi
  if ! cmp -s "$WORK" "$EXPECT"; then
    fail "$c" "$ms" "$how" "after the rerun the file is not the target"
  elif [ -e "$JOURNAL" ] || [ -e "$JOURNAL.tmp" ]; then
    fail "$c" "$ms" "$how" "the rerun left a journal"
  fi
done

echo "crash_test: runs $runs, kills mid-run $mid, after the run had finished $after," \
     "kills that left a journal: committed $committed_journals, unpublished (.tmp)" \
     "$uncommitted_journals; recoveries observed $recoveries, failures $failures"
[ "$failures" -eq 0 ]
