#!/usr/bin/env bash
# crash_dir_test.sh - kill -9 `dcr apply --in-place DIR B1 B2 B3` (a model directory,
# SPEC.md §18.6) at random moments, then check that running the same command again
# finishes the series.
#
# usage: tests/crash_dir_test.sh [path/to/dcr] [COUNT]     (defaults: build/dcr, 200)
#
# The series takes a 4-shard directory (index, config, tokenizer files) through
# three steps: tensors re-sharded and one moved to the last shard; the vocabulary
# grown by 64 rows (shards resized) and config.json changed; other values and the
# tokenizer files removed. COUNT times: copies the base to DIR, starts the series
# (--no-sync every other run), kill -9s it after a random time between 0 and a
# clean run's duration, and checks that
#   - right after the kill, DIR's members are the base's or one of the three
#     targets' file for file (what a writer left under DIR/.dcr-* is hidden: no
#     member, §2.3), or a published journal (DIR/.dcr-journal) lies in it;
#   - the same command, run again, exits 0 and leaves the last target file for file,
#     with nothing of the apply's left (no DIR/.dcr-*).
# Prints one line per failure and a summary (runs, kills mid-run, kills that left a
# journal, recoveries the rerun reported, failures). CRASH_SEED fixes the times.
set -u

MKSET=$(cd "$(dirname "$0")" && pwd)/mkset.py
. "$(dirname "$0")/crash_lib.sh" crash_dir_test 200 "$@"
cd "$W" || exit 3

"$DCR" synth b.st t.st --size 8M --rate 0.01 --seed 5 -q --no-progress &&
  "$DCR" synth b2.st u.st --size 8M --rate 0.02 --seed 5 -q --no-progress || die "dcr synth failed"
python3 "$MKSET" b.st S0 && python3 "$MKSET" t.st S1 --reverse --move model.embed_tokens.weight &&
  python3 "$MKSET" t.st S2 --grow model.embed_tokens.weight:64 --config '{"vocab_size": 1762}' &&
  python3 "$MKSET" u.st S3 --grow model.embed_tokens.weight:64 --config '{"vocab_size": 1762}' \
    --no-extras || die "mkset failed"
for i in 1 2 3; do
  "$DCR" encode "S$((i - 1))" "S$i" -o "b$i.dcr" -q || die "encode S$((i - 1)) S$i failed"
done

is_state() { for s in S0 S1 S2 S3; do diff -r -q -x '.*' "$1" "$s" >/dev/null 2>&1 && return 0; done; return 1; }

# a clean run's duration, in milliseconds: the kills land within it
cp -r S0 D
t0=$(date +%s%N)
"$DCR" apply --in-place D b1.dcr b2.dcr b3.dcr -q || die "a clean run failed"
ms=$(( ($(date +%s%N) - t0) / 1000000 + 1 ))
diff -r -q D S3 >/dev/null || die "a clean run does not give the target"
rm -rf D

runs=0 mid=0 journals=0 recovered=0 failures=0
for ((k = 0; k < COUNT; k++)); do
  runs=$((k + 1))
  sync_opt=
  [ $((k % 2)) = 1 ] && sync_opt=--no-sync
  rm -rf D && cp -r S0 D
  "$DCR" apply --in-place D b1.dcr b2.dcr b3.dcr -q $sync_opt 2>/dev/null &
  PID=$!
  wait_ms=$(( (RANDOM * 32768 + RANDOM) % ms ))
  sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
  kill -9 "$PID" 2>/dev/null && mid=$((mid + 1))
  wait "$PID" 2>/dev/null
  PID=
  if [ -e D/.dcr-journal ]; then journals=$((journals + 1))
  elif ! is_state D; then
    echo "run $k (+${wait_ms} ms): the kill left no journal and a directory that is no state of the series"
    failures=$((failures + 1)); continue
  fi
  out=$("$DCR" apply --in-place D b1.dcr b2.dcr b3.dcr $sync_opt 2>&1)
  rc=$?
  case $out in *"finished an apply that had been interrupted"*) recovered=$((recovered + 1)) ;; esac
  if [ $rc != 0 ]; then
    echo "run $k (+${wait_ms} ms): the rerun exits $rc: $out"; failures=$((failures + 1))
  elif ! diff -r -q D S3 >/dev/null; then
    echo "run $k (+${wait_ms} ms): the rerun leaves $(diff -r -q D S3 | head -2 | tr '\n' '|')"
    failures=$((failures + 1))
  fi
done
echo "crash_dir_test: $runs runs (seed $SEED, clean run $ms ms), $mid killed mid-run," \
  "$journals left a journal, $recovered recoveries, $failures failures"
[ $failures = 0 ]
