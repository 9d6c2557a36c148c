#!/usr/bin/env bash
# crash_history_test.sh - kill -9 `dcr history append RUN.tar B3 B4` (an append in
# place, SPEC.md §19.6) at random moments, then check that the next run rolls a torn
# append back.
#
# usage: tests/crash_history_test.sh [path/to/dcr] [COUNT]   (defaults: build/dcr, 100)
#
# The archive holds a 16 MiB keyframe and two bundles; the append adds two more
# bundles (about 1 MiB each) and a keyframe (--keyframe-every 4: 16 MiB built from the
# chain), so that the kill lands while the bundles are checked, while the keyframe
# is built, while members are written and while the index is. COUNT times: copies
# the archive, starts the append (--no-sync every other run), kill -9s it after a
# random time between 0 and a clean run's duration, and checks that
#   - right after the kill, the archive's bytes before the end of its old members
#     but for its index are those of before (an append writes nothing else), and it
#     is the old archive or the appended one byte for byte, or a journal
#     (RUN.tar.dcr-append) lies beside it;
#   - `dcr history list` (which rolls the journal back) exits 0 and leaves the old
#     archive or the appended one byte for byte, on the same inode, with no journal;
#   - the same append, run again, exits 0 and leaves the appended archive byte for
#     byte.
# Prints one line per failure and a summary. CRASH_SEED fixes the times.
set -u

MKCHAIN=$(cd "$(dirname "$0")" && pwd)/mkchain.py
. "$(dirname "$0")/crash_lib.sh" crash_history_test 100 "$@"
cd "$W" || exit 3

python3 "$MKCHAIN" --bytes 16777216 --rate 0.02 c 4 >/dev/null || die "mkchain failed"
for i in 0 1 2 3 4; do mv "c/step-000$i.safetensors" "s$i.st"; done
for i in 1 2 3 4; do
  "$DCR" encode "s$((i - 1)).st" "s$i.st" -o "b$i.dcr" -q || die "encode step $i failed"
done
"$DCR" history create old.tar --keyframe s0.st b1.dcr b2.dcr -q || die "history create failed"
cp old.tar new.tar
"$DCR" history append new.tar b3.dcr b4.dcr --keyframe-every 4 -q || die "a clean append failed"
cmp -s old.tar new.tar && die "the append changed nothing"
python3 - old.tar new.tar <<'EOF' || die "a clean append did not append in place"
import sys, tarfile
old, new = (open(p, "rb").read() for p in sys.argv[1:3])
with tarfile.open(sys.argv[1]) as t:
    index = t.getmembers()[0]
    start, end = index.offset_data + index.size, t.offset
if old[:index.offset_data] != new[:index.offset_data] or old[start:end] != new[start:end]:
    sys.exit("bytes outside the index slot before the old end differ")
EOF

# the bytes an append never writes: all before the old end but the index slot
unchanged() {
  python3 - old.tar "$1" <<'EOF'
import sys, tarfile
old, new = (open(p, "rb").read() for p in sys.argv[1:3])
with tarfile.open(sys.argv[1]) as t:
    index = t.getmembers()[0]
    start, end = index.offset_data + index.size, t.offset
sys.exit(old[:index.offset_data] != new[:index.offset_data] or old[start:end] != new[start:end])
EOF
}

cp old.tar D.tar
t0=$(date +%s%N)
"$DCR" history append D.tar b3.dcr b4.dcr --keyframe-every 4 -q || die "a clean run failed"
ms=$(( ($(date +%s%N) - t0) / 1000000 + 1 ))
cmp -s D.tar new.tar || die "two clean appends differ"

runs=0 mid=0 journals=0 rolled=0 failures=0
for ((k = 0; k < COUNT; k++)); do
  runs=$((k + 1))
  sync_opt=
  [ $((k % 2)) = 1 ] && sync_opt=--no-sync
  rm -f D.tar D.tar.dcr-append && cp old.tar D.tar
  inode=$(stat -c %i D.tar)
  "$DCR" history append D.tar b3.dcr b4.dcr --keyframe-every 4 -q $sync_opt 2>/dev/null &
  PID=$!
  # every other kill lands in the run's last third, where it writes
  wait_ms=$(( (RANDOM * 32768 + RANDOM) % ms ))
  [ $((k % 4)) -ge 2 ] && wait_ms=$(( ms * 2 / 3 + wait_ms / 3 ))
  sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
  kill -9 "$PID" 2>/dev/null && mid=$((mid + 1))
  wait "$PID" 2>/dev/null
  PID=
  fail() { echo "run $k (+${wait_ms} ms): $*"; failures=$((failures + 1)); }
  if ! unchanged D.tar; then fail "the kill left bytes changed that an append never writes"; continue; fi
  if [ -e D.tar.dcr-append ]; then journals=$((journals + 1))
  elif ! cmp -s D.tar old.tar && ! cmp -s D.tar new.tar; then
    fail "the kill left no journal and an archive that is neither the old nor the appended one"; continue
  fi
  out=$("$DCR" history list D.tar 2>&1) || { fail "list after the kill: $out"; continue; }
  [ -e D.tar.dcr-append ] && { fail "list left the journal"; continue; }
  if cmp -s D.tar old.tar; then rolled=$((rolled + 1))
  elif ! cmp -s D.tar new.tar; then fail "list leaves an archive that is neither the old nor the appended one"; continue
  fi
  [ "$(stat -c %i D.tar)" = "$inode" ] || { fail "the archive is not on its inode any more"; continue; }
  if cmp -s D.tar old.tar; then
    out=$("$DCR" history append D.tar b3.dcr b4.dcr --keyframe-every 4 -q $sync_opt 2>&1) ||
      { fail "the rerun exits $?: $out"; continue; }
    cmp -s D.tar new.tar || fail "the rerun leaves an archive other than the appended one"
  fi
done
echo "crash_history_test: $runs runs (seed $SEED, clean run $ms ms), $mid killed mid-run," \
  "$journals left a journal, $rolled rolled back or untouched, $failures failures"
[ $failures = 0 ]
