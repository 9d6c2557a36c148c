#!/usr/bin/env bash
# cli_apply_output_test.sh DCR - where `dcr apply -o OUT` writes (issues #15, #18):
# an added all-zero tensor is neither allocated nor written (a sparse output, small
# peak memory), a filesystem without room fails before writing and names OUT, a
# killed apply leaves no temporary file (O_TMPFILE), a name of NAME_MAX bytes
# works, and -f over an existing file keeps its mode.
# Needs python3; the free-space case needs root (a 1 MiB tmpfs) and is skipped
# without it; peak memory needs GNU time (/usr/bin/time), skipped without it.
set -u
DCR=$(cd "$(dirname "${1:?usage: cli_apply_output_test.sh DCR}")" && pwd)/$(basename "$1")
NAME=apply-output
. "$(dirname "$0")/cli_lib.sh"
MNT=
cleanup_mount() { [ -n "$MNT" ] && umount "$MNT" 2>/dev/null; }
trap 'cleanup_mount; rm -rf "$W"' EXIT

# mkpair N: base.st (one 4 KiB tensor) and target.st (the same and an added
# all-zero U8 tensor of N bytes, written sparse).
mkpair() {
  python3 - "$1" <<'EOF'
import json, struct, sys
def write(path, tensors):
    hdr, off = {}, 0
    for name, n in tensors:
        hdr[name] = {"dtype": "U8", "shape": [n], "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(range(256)) * 16)
        f.truncate(8 + len(h) + off)
n = int(sys.argv[1])
write("base.st", [("a", 4096)])
write("target.st", [("a", 4096), ("z", n)])
EOF
}

t_zero_tensor() {
  mkpair $((1 << 30)) || return $(fail "cannot make the pair")
  run encode base.st target.st -o z.dcr -q
  want_rc 0 "encode" || return
  local size
  size=$(stat -c %s z.dcr)
  [ "$size" -lt 4096 ] || fail "a bundle adding 1 GiB of zeros is $size bytes"
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o rss "$DCR" apply base.st z.dcr -o out.st -q 2>e; RC=$?
  else
    run apply base.st z.dcr -o out.st -q
  fi
  want_rc 0 "apply" || return
  [ "$(stat -c %s out.st)" = "$(stat -c %s target.st)" ] || fail "output size differs"
  local used=$(( $(stat -c %b out.st) * $(stat -c %B out.st) ))
  [ "$used" -lt $((16 << 20)) ] || fail "output of 1 GiB of zeros uses $used bytes: not sparse"
  if [ -f rss ]; then
    [ "$(tail -1 rss)" -lt 65536 ] || fail "peak RSS $(tail -1 rss) KiB for 1 GiB of zeros"
  fi
  cmp -s out.st target.st || fail "output differs from the target"
  run validate z.dcr --target out.st -q
  want_rc 0 "validate --target"
  rm -f out.st target.st rss
}

t_no_room() {
  if [ "$(id -u)" != 0 ]; then echo "# skipped: no room (needs root for a tmpfs)"; return; fi
  mkdir -p mnt && mount -t tmpfs -o size=1m tmpfs mnt 2>/dev/null ||
    { echo "# skipped: no room (cannot mount a tmpfs)"; return; }
  MNT=$PWD/mnt
  run synth sb.st st.st --size 4M -q
  run encode sb.st st.st -o s.dcr -q
  want_rc 0 "encode" || return
  run apply sb.st s.dcr -o mnt/out.st
  want_rc 3 "apply to a 1 MiB filesystem"
  has e "mnt/out.st: DCR_E_IO: not enough space" "the error names the output"
  has e "needs 4.0 MiB" "the error says what is needed"
  [ -z "$(ls -A mnt)" ] || fail "left in the full filesystem: $(ls -A mnt | tr '\n' ' ')"
  umount mnt; MNT=
}

t_kill_leaves_nothing() {
  [ -f sb.st ] || run synth sb.st st.st --size 4M -q
  run synth kb.st kt.st --size 256M -q
  run encode kb.st kt.st -o k.dcr -q
  want_rc 0 "encode" || return
  mkdir -p od
  local delay pid
  for delay in 0.02 0.05 0.1 0.2; do
    rm -rf od && mkdir od
    "$DCR" apply kb.st k.dcr -o od/out.st --threads 1 -q 2>/dev/null & pid=$!
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    local left
    left=$(ls -A od | grep -vx out.st)
    [ -z "$left" ] || { fail "kill -9 after ${delay}s left: $left"; return; }
  done
  rm -f kb.st kt.st k.dcr
}

t_long_name() {
  [ -f s.dcr ] || { run synth sb.st st.st --size 4M -q; run encode sb.st st.st -o s.dcr -q; }
  local long
  long=$(printf 'n%.0s' $(seq 1 "$(getconf NAME_MAX .)"))
  run apply sb.st s.dcr -o "$long" -q
  want_rc 0 "apply to a name of NAME_MAX bytes" || return
  cmp -s "$long" st.st || fail "output differs"
  rm -f "$long"
}

t_force_keeps_mode() {
  echo old > kept.st
  chmod 600 kept.st
  run apply sb.st s.dcr -o kept.st -f -q
  want_rc 0 "apply -f" || return
  [ "$(stat -c %a kept.st)" = 600 ] || fail "mode is $(stat -c %a kept.st), was 600"
  cmp -s kept.st st.st || fail "output differs"
}

tcase "added all-zero tensor: sparse output, small memory" t_zero_tensor
tcase "no room: fails before writing, names the output" t_no_room
tcase "kill -9 during apply leaves no temporary file" t_kill_leaves_nothing
tcase "output name of NAME_MAX bytes" t_long_name
tcase "-f over an existing file keeps its mode" t_force_keeps_mode
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
