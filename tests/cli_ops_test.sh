#!/usr/bin/env bash
# cli_ops_test.sh - what an operator meets (issues 15 and 18): outputs that are
# inputs, directories, devices, FIFOs and links; pipes as inputs; interrupts;
# one format for usage errors; hints; --json results; escaped names; writer-side
# validation; the default thread count.
#
# usage: tests/cli_ops_test.sh [path/to/dcr]      (default: build/dcr)
set -u

DCR=${1:-build/dcr}
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=ops-test
# shellcheck source=cli_lib.sh
. "$HERE/cli_lib.sh"

note() { echo "  # $*"; }
has() { grep -q -- "$1" "$2" || fail "$3: '$1' not in $2: $(shown "$2")"; }
json_get() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d[int(k)] if isinstance(d,list) else d[k]
print(d)' "$1" "$2"; }

"$DCR" synth base.st target.st --size 2M -q || { echo "not ok - setup: synth failed"; exit 1; }
"$DCR" encode base.st target.st -o step.dcr -q || { echo "not ok - setup: encode failed"; exit 1; }

t_output_is_input() {
  cp base.st b.st
  local sum
  sum=$(cksum <b.st)
  run encode b.st target.st -o b.st -f
  want_rc 2 "encode -o BASE -f"
  has "is an input" e "encode -o BASE -f"
  ln -f b.st hard.st
  run encode b.st target.st -o hard.st -f
  want_rc 2 "encode -o HARDLINK-TO-BASE -f"
  has "the same file as b.st" e "hard link"
  run apply b.st step.dcr -o b.st -f
  want_rc 2 "apply -o BASE -f"
  has "--in-place" e "apply -o BASE -f hint"
  "$DCR" encode b.st target.st -o - >>b.st 2>e
  RC=$?
  want_rc 2 "encode -o - >> BASE"
  [ "$(cksum <b.st)" = "$sum" ] || fail "an input was changed"
}
tcase "an output that is an input is refused, even with -f, through links, and on stdout" t_output_is_input

t_output_dir() {
  mkdir -p d
  run encode base.st target.st -o d -f
  want_rc 2 "-o DIR -f"
  has "is a directory" e "-o DIR"
  run apply base.st step.dcr -o d -f
  want_rc 2 "apply -o DIR -f"
  [ -z "$(ls -A d)" ] || fail "files left in d"
}
tcase "-o DIRECTORY fails up front" t_output_dir

t_output_devices() {
  run encode base.st target.st -o /dev/null -f
  want_rc 0 "encode -o /dev/null -f"
  [ -c /dev/null ] || fail "/dev/null is no longer a character device"
  run encode base.st target.st -o /dev/null
  want_rc 0 "encode -o /dev/null (no -f needed: it is written into, not replaced)"
  rm -f fifo && mkfifo fifo || { fail "mkfifo"; return; }
  cat fifo >from-fifo &
  local reader=$!
  run encode base.st target.st -o fifo
  wait "$reader"
  want_rc 0 "encode -o FIFO"
  [ -p fifo ] || fail "the FIFO was replaced"
  cmp -s from-fifo step.dcr || fail "the bundle read from the FIFO differs"
  run apply base.st step.dcr -o /dev/null
  want_rc 0 "apply -o /dev/null"
  [ -c /dev/null ] || fail "apply replaced /dev/null"
  if [ -c /dev/full ]; then
    run apply base.st step.dcr -o /dev/full
    want_rc 3 "apply -o /dev/full"
    has "No space left" e "apply -o /dev/full"
    ! grep -q verified e || fail "apply -o /dev/full said verified: $(shown e)"
    [ -c /dev/full ] || fail "apply replaced /dev/full"
  fi
  cat fifo >applied-fifo &
  reader=$!
  run apply base.st step.dcr -o fifo
  wait "$reader"
  want_rc 0 "apply -o FIFO"
  cmp -s applied-fifo target.st || fail "the target read from the FIFO differs"
}
tcase "character devices and FIFOs are written into, never replaced" t_output_devices

t_output_symlink() {
  cp target.st linked.st
  ln -sf linked.st link.dcr
  run encode base.st target.st -o link.dcr
  want_rc 2 "-o SYMLINK without -f"
  run encode base.st target.st -o link.dcr -f
  want_rc 0 "-o SYMLINK -f"
  [ ! -L link.dcr ] || fail "the link was written through, not replaced"
  cmp -s linked.st target.st || fail "the file the link pointed to was changed"
}
tcase "-o SYMLINK -f replaces the link, not the file it points to" t_output_symlink

t_pipe_inputs() {
  rm -f bfifo && mkfifo bfifo || { fail "mkfifo"; return; }
  cat step.dcr >bfifo &
  run validate bfifo
  want_rc 0 "validate FIFO"
  cat step.dcr >bfifo &
  run apply base.st bfifo -o via-fifo.st
  want_rc 0 "apply BASE FIFO"
  cmp -s via-fifo.st target.st || fail "apply from a FIFO made another file"
  # a checkpoint cannot come from a pipe: refused before open() would block
  run apply bfifo step.dcr -o never.st
  want_rc 2 "apply FIFO-as-base"
  has "not a regular file" e "FIFO base"
  # not a bundle: decided from the first bytes, not after reading all of it
  local start end
  start=$(date +%s)
  head -c 200000000 /dev/zero | "$DCR" validate - >o 2>e
  RC=$?
  end=$(date +%s)
  want_rc 1 "validate - < zeros"
  has DCR_E_MAGIC e "zeros on stdin"
  [ $((end - start)) -lt 20 ] || fail "took $((end - start)) s to reject zeros"
}
tcase "bundles from FIFOs and pipes; garbage rejected from its first bytes" t_pipe_inputs

t_usage_format() {
  run encode --bogus base.st target.st -o x
  want_rc 2 "unknown option"
  has "^dcr encode: unknown option '--bogus'" e "unknown option"
  has "Try 'dcr encode --help'" e "unknown option"
  run apply base.st step.dcr -o
  want_rc 2 "missing value"
  has "^dcr apply: option '-o' needs a value" e "missing value"
  run encode base.st target.st extra.st -o x
  want_rc 2 "too many"
  has "too many arguments (from 'extra.st' on)" e "too many arguments"
  run encode base.st
  want_rc 2 "missing"
  has "missing arguments" e "missing arguments"
  [ "$(grep -c . e)" = 2 ] || fail "usage errors are not two lines: $(shown e)"
}
tcase "usage errors: one format; too many arguments are not 'missing'" t_usage_format

t_swap_hint() {
  run apply step.dcr base.st -o x.st
  want_rc 1 "apply BUNDLE BASE"
  has "DCR_E_MAGIC" e "swapped"
  has "hint: step.dcr is a bundle and base.st is not" e "swapped"
  [ ! -e x.st ] || fail "output left"
}
tcase "swapped apply arguments get a hint" t_swap_hint

t_wrong_base_names_the_input() {
  "$DCR" synth other.st other2.st --size 2M --seed 7 -q || { fail "synth"; return; }
  run apply other.st step.dcr -o never.st
  want_rc 1 "apply to another checkpoint"
  has "^dcr: other.st: DCR_E_BASE_MISMATCH" e "wrong base"
  ! grep -q "section CHNK" e || fail "the input is named with the bundle's section and offset: $(shown e)"
}
tcase "a wrong base is reported against the input, without the bundle's offsets" t_wrong_base_names_the_input

t_inspect_json_error() {
  head -c 100 step.dcr >cut.dcr
  run inspect cut.dcr --json
  want_rc 1 "inspect --json on a cut bundle"
  [ "$(json_get o error.code)" = DCR_E_TRUNCATED ] || fail "no error document: $(shown o)"
}
tcase "inspect --json on a broken bundle prints an error document" t_inspect_json_error

t_json_results() {
  run encode base.st target.st -o j.dcr --json
  want_rc 0 "encode --json"
  [ "$(json_get o bundle_bytes)" = "$(stat -c %s j.dcr)" ] || fail "encode --json bundle_bytes: $(shown o)"
  run apply base.st j.dcr -o j.st --json
  want_rc 0 "apply --json"
  [ "$(json_get o target_bytes)" = "$(stat -c %s target.st)" ] || fail "apply --json: $(shown o)"
  [ -z "$(cat e)" ] || fail "apply --json also printed on stderr: $(shown e)"
  run encode base.st target.st -o - --json
  want_rc 2 "encode -o - --json"
  run bench base.st target.st --runs 1 --threads 1 --json
  want_rc 0 "bench --json"
  [ "$(json_get o copy.0.threads)" = 1 ] || fail "bench --json: $(shown o)"
}
tcase "--json results for encode, apply and bench" t_json_results

t_meta_validated() {
  local key
  key=$(printf 'k%.0s' $(seq 5000))
  run encode base.st target.st -o m.dcr --meta "$key=v"
  want_rc 2 "a 5000-byte metadata key"
  has "readers would reject this metadata" e "long key"
  [ ! -e m.dcr ] || fail "a bundle was written"
}
tcase "metadata every reader would reject is refused before writing" t_meta_validated

t_escaped_names() {
  python3 "$HERE/mkckpt.py" pair '{"seed": 3, "tensors": [{"name": "evil\u001b[31mred\r\nforged", "dtype": "BF16", "shape": [64], "fill": "mutate", "rate": 0.5}]}' eb.st et.st ||
    { fail "mkckpt"; return; }
  "$DCR" encode eb.st et.st -o e.dcr -q || { fail "encode"; return; }
  run inspect e.dcr -v
  want_rc 0 "inspect"
  ! grep -q $'\x1b' o || fail "an escape character reached the terminal: $(shown o)"
  has 'evil\\x1b\[31mred\\x0d\\x0aforged' o "escaped name"
  run apply base.st e.dcr -o never.st
  ! grep -q $'\x1b' e || fail "an escape character in an error message"
}
tcase "control characters in names are escaped in human output" t_escaped_names

# Bytes that are no UTF-8 character are escaped as control characters are (issue 32):
# a tensor name in a bundle that breaks R-NAM, a set member's file name.
t_escaped_not_utf8() {
  run validate "$HERE/../testvectors/v1/invalid/name-truncated-utf8.dcr"
  want_rc 1 "a name cut inside a character"
  ! LC_ALL=C grep -q $'[\x80-\xff]' e || fail "bytes that are not UTF-8 reached the terminal: $(shown e)"
  has 'tensor "c\\xe2\\x82")' e "the name, escaped"
  mkdir -p badset && printf 'x' >"badset/$(printf 'm\xff\xc3(.bin')" || { fail "setup"; return; }
  run id badset
  want_rc 1 "a member whose file name is not UTF-8"
  ! LC_ALL=C grep -q $'[\x80-\xff]' e || fail "bytes that are not UTF-8 reached the terminal: $(shown e)"
  has 'badset/m\\xff\\xc3(\.bin' e "the file name, escaped"
  rm -rf badset
}
tcase "bytes that are not UTF-8 in names are escaped in human output" t_escaped_not_utf8

t_interrupts() {
  "$DCR" synth big1 big2 --size 1G -q &
  local p=$!
  sleep 0.3
  kill -INT "$p"
  wait "$p"
  RC=$?
  want_rc 130 "synth interrupted"
  [ -z "$(ls -A | grep -E '^(big|\.big)')" ] || fail "synth left: $(ls -A | grep big | tr '\n' ' ')"
}
tcase "an interrupted synth exits 130 and leaves nothing" t_interrupts

t_memory_budget() {
  python3 - <<'PY' || { fail "could not write the header bomb"; return; }
import struct
t = ('{"a":[' + ','.join(['{}'] * (13 << 20)) + ']}').encode()
t += b' ' * ((8 - len(t) % 8) % 8)
open('bomb.st', 'wb').write(struct.pack('<Q', len(t)) + t)
PY
  "$DCR" id bomb.st >o 2>e
  RC=$?
  want_rc 3 "a 40 MB header that would parse into 4 GiB"
  has "DCR_E_NOMEM" e "header bomb"
  has "memory budget" e "header bomb"
  run id --memory 64M base.st
  want_rc 0 "--memory 64M on a small checkpoint"
  run id --memory x base.st
  want_rc 2 "bad --memory"
  has "^dcr id: bad --memory 'x'" e "bad --memory"
  rm -f bomb.st
}
tcase "the memory budget: a header bomb is refused before parsing (exit 3); --memory sets it" t_memory_budget

# peak_kib CMD...: runs CMD, prints its peak resident memory in KiB
peak_kib() {
  python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if rc == 0 else -1)' "$@"
}

t_threads_within_budget() {
  head -c 67108864 /dev/urandom >r1 && cp r1 r2 && printf 'x' | dd of=r2 bs=1 seek=1000 conv=notrunc status=none &&
    printf 'y' | dd of=r2 bs=1 seek=40000000 conv=notrunc status=none || { fail "setup"; return; }
  "$DCR" encode --raw r1 r2 -o r.dcr --chunk-size 16M -q || { fail "encode"; return; }
  local small big
  small=$(peak_kib "$DCR" apply r1 r.dcr -o r.small --threads 2 --memory 64M)
  big=$(peak_kib "$DCR" apply r1 r.dcr -o r.big --threads 2 --memory 1G)
  [ "$small" -gt 0 ] && [ "$big" -gt 0 ] || { fail "an apply failed"; return; }
  cmp -s r.small r2 && cmp -s r.big r2 || { fail "outputs differ"; return; }
  # one thread's buffers (16 MiB chunks) against two threads' and their window
  [ "$small" -lt $((big * 3 / 4)) ] || fail "peak $small KiB under --memory 64M, $big KiB under 1G"
  rm -f r1 r2 r.dcr r.small r.big
}
tcase "threads are reduced to fit the memory budget (same output, less memory)" t_threads_within_budget

t_max_size() {
  run apply base.st step.dcr -o capped.st --max-size 1M
  want_rc 1 "a 2 MiB target under --max-size 1M"
  has "DCR_E_LIMIT" e "--max-size"
  [ ! -e capped.st ] || fail "an output was left"
  run apply base.st step.dcr -o capped.st --max-size 1G
  want_rc 0 "--max-size 1G"
}
tcase "apply --max-size refuses a larger target before writing" t_max_size

t_default_threads() {
  command -v taskset >/dev/null || { note "skipped: no taskset"; return; }
  taskset -c 0 "$DCR" encode base.st target.st -o t.dcr -v 2>e >o
  RC=$?
  want_rc 0 "encode under taskset"
  has "threads: 1" e "one CPU allowed: one thread"
}
tcase "the default thread count follows the CPU affinity" t_default_threads

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
