#!/usr/bin/env bash
# cli_set_test.sh DCR - whole model directories as one update (format 1.1, issue
# #11): a sharded model encoded and applied directory to directory, a tensor that
# moves between shards coded against its base bytes, one state id however the
# tensors are sharded, a vocabulary grown by 64 rows and a raw file grown at its
# end costing what changed (RSIZ), the dtypes of 1.1, the output directory that
# appears whole (a kill -9 at any moment leaves the old set or the new one), and
# the refusals that say what they saw. Needs python3.
set -u
DCR=$(cd "$(dirname "${1:?usage: cli_set_test.sh DCR}")" && pwd)/$(basename "$1")
NAME=sets
MKSET=$(cd "$(dirname "$0")" && pwd)/mkset.py
. "$(dirname "$0")/cli_lib.sh"

# same_tree A B: the two directories hold the same files, byte for byte.
same_tree() { diff -r "$1" "$2" >/dev/null || fail "$1 and $2 differ: $(diff -rq "$1" "$2" | head -3 | tr '\n' '|')"; }
size() { stat -c %s "$1"; }
id_of() { "$DCR" id "$@" | cut -d' ' -f1; }

"$DCR" synth b.st t.st --size 4M --seed 3 -q || { echo "not ok - setup: synth"; exit 1; }
python3 "$MKSET" b.st B && python3 "$MKSET" t.st T --reverse --move model.embed_tokens.weight &&
  python3 "$MKSET" t.st T2 --grow model.embed_tokens.weight:64 --config '{"vocab_size": 1762}' ||
  { echo "not ok - setup: mkset"; exit 1; }

t_round_trip() {
  run encode B T -o s.dcr -q; want_rc 0 "encode B T" || return
  run inspect --json s.dcr; want_rc 0 inspect
  [ "$(jget o 'j["format_version"]')" = 1.3 ] || fail "a set whose shards change is format 1.3 (1.1 at least, DELTA_BANDED allowed)"
  [ "$(jget o 'j["kind"]')" = set ] || fail "kind set"
  [ "$(jget o 'len(j["members"])')" = 9 ] || fail "9 members: $(jget o 'len(j["members"])')"
  # the tensor that moved to another shard is coded against its base bytes
  [ "$(jget o '[t["status"] for t in j["tensors"] if t["name"] == "model.embed_tokens.weight"][0]')" = changed ] ||
    fail "a moved tensor is delta-coded"
  # the text is a summary: tensors and raw members counted apart, rows with -v
  run inspect s.dcr; want_rc 0 "inspect"
  grep -Eq '^  tensors: [0-9]+ \([0-9]+ changed' o || fail "inspect counts the tensors: $(head -8 o)"
  grep -Eq '^  raw members: 5 \(' o || fail "inspect counts the 5 raw members apart: $(head -8 o)"
  grep -q 'model.embed_tokens.weight' o && fail "without -v, no row per tensor"
  run inspect -v s.dcr; want_rc 0 "inspect -v"
  grep -q 'model.embed_tokens.weight' o || fail "-v lists every tensor"
  grep -q 'tokenizer/special_tokens_map.json' o || fail "-v lists every member file"
  run apply B s.dcr -o O; want_rc 0 "apply" || return
  same_tree O T
  [ "$(stat -c %a O)" = "$(stat -c %a T)" ] || fail "the output's mode is mkdir's: $(stat -c %a O)"
  run validate s.dcr --base B --target T; want_rc 0 "validate --base --target"
  # the set bundle is no larger than the one of the same tensors as single files
  run encode b.st t.st -o f.dcr -q
  [ "$(size s.dcr)" -le $(( $(size f.dcr) * 21 / 20 )) ] || fail "set bundle $(size s.dcr) vs file $(size f.dcr)"
}

t_state_id() {
  [ "$(id_of B)" = "$(id_of b.st)" ] || fail "a set has the id of the same tensors in one file"
  python3 "$MKSET" b.st B8 --shards 8 --reverse --config '{"other": 1}' || return $(fail "mkset")
  [ "$(id_of B8)" = "$(id_of B)" ] || fail "re-sharding (and another config) keeps the state id"
  [ "$(id_of B/model.safetensors.index.json)" = "$(id_of B)" ] || fail "the index names its directory"
  mkdir -p B8/.cache/huggingface && echo x > B8/.cache/huggingface/lock && echo y > B8/.hidden
  [ "$(id_of B8)" = "$(id_of B)" ] || fail "hidden files are not members"
  # a tree 2000 directories deep (a path of 4001 bytes, under max_name_length): read
  # with a queue, not recursion, so neither the stack nor the descriptors run out
  python3 -c 'import os
d = os.open(".", os.O_RDONLY)
for _ in range(2000):
    os.mkdir("a", dir_fd=d); k = os.open("a", os.O_RDONLY, dir_fd=d); os.close(d); d = k
f = os.open("x", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=d); os.write(f, b"hi")' 2>/dev/null ||
    mkdir -p DEEP
  mkdir -p DEEP && mv a DEEP/ 2>/dev/null
  run id DEEP; want_rc 0 "a 2000-level tree"
  run encode B B8 -o r.dcr -q; want_rc 0 "encode a re-sharded copy"
  run inspect --json r.dcr
  [ "$(jget o 'j["chunk_count"]')" -le 4 ] || fail "re-sharding carries only the raw files' changes: $(jget o 'j["chunk_count"]') chunks"
  run apply B r.dcr -o O8; want_rc 0 "apply the re-sharding"
  rm -rf B8/.cache B8/.hidden; same_tree O8 B8
}

t_vocabulary_growth() {
  run encode T T2 -o g.dcr --json; want_rc 0 "encode T T2" || return
  [ "$(jget o 'j["tensors_resized"]')" = 2 ] || fail "the embedding and config.json are resized: $(cat o)"
  run encode T T2 -o g10.dcr --format 1.0 --json; want_rc 2 "--format 1.0 refuses a set"
  has e "format 1.1" "says which format it needs"
  # the 64 rows are 64 x 192 BF16 of random bytes: 24 KiB, compressed a little
  [ "$(size g.dcr)" -lt 40000 ] || fail "64 rows cost $(size g.dcr) bytes"
  run apply T g.dcr -o OG; want_rc 0 "apply the growth"; same_tree OG T2
  run inspect g.dcr; has o "resized" "inspect says resized"
  # a series: B -> T -> T2 without intermediate directories left behind
  run apply B s.dcr g.dcr -o OS; want_rc 0 "a series of sets"; same_tree OS T2
  [ -z "$(ls -A . | grep dcr-series)" ] || fail "a series left $(ls -A | grep dcr-series)"
}

t_raw_growth() {
  head -c 1000000 /dev/urandom > r0 && cp r0 r1 && head -c 1000 /dev/urandom >> r1
  printf 'x' | dd of=r1 bs=1 seek=5000 conv=notrunc 2>/dev/null
  run encode --raw r0 r1 -o rg.dcr -q; want_rc 0 "encode a raw file that grew"
  run encode --raw r0 r1 -o rg10.dcr -q --format 1.0; want_rc 0 "--format 1.0"
  [ "$(size rg.dcr)" -lt 3000 ] || fail "1000 bytes appended cost $(size rg.dcr)"
  [ "$(size rg10.dcr)" -gt 1000000 ] || fail "in 1.0 the file goes whole: $(size rg10.dcr)"
  run apply r0 rg.dcr -o r2; want_rc 0 "apply"; cmp -s r1 r2 || fail "raw growth round trip"
  head -c 990000 r0 > r3
  run encode --raw r0 r3 -o rs.dcr -q; want_rc 0 "a raw file that shrank"
  [ "$(size rs.dcr)" -lt 1000 ] || fail "a shrink costs $(size rs.dcr)"
  run apply r0 rs.dcr -o r4; cmp -s r3 r4 || fail "raw shrink round trip"
}

t_new_dtypes() {
  python3 - <<'EOF' || return $(fail "cannot write the dtype pair")
import json, os, random, struct
random.seed(5)
def write(path, tensors):
    hdr, blobs, off = {}, [], 0
    for name, dtype, shape, blob in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob); off += len(blob)
    h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
spec = [("e8m0", "F8_E8M0", [4096], 4096), ("fnuz", "F8_E4M3FNUZ", [64, 64], 4096),
        ("fnuz2", "F8_E5M2FNUZ", [4096], 4096), ("c", "C64", [512], 4096),
        ("f4", "F4", [64, 128], 4096), ("f6", "F6_E2M3", [4, 4096], 12288),
        ("f6b", "F6_E3M2", [8192], 6144)]
base = [(n, d, s, os.urandom(b)) for n, d, s, b in spec]
target = []
for n, d, s, blob in base:
    b = bytearray(blob)
    for i in random.sample(range(len(b)), len(b) // 50): b[i] ^= 1
    target.append((n, d, s, bytes(b)))
write("d0.st", base); write("d1.st", target)
EOF
  run encode d0.st d1.st -o d.dcr --json; want_rc 0 "encode the 1.1 dtypes" || return
  [ "$(jget o 'j["format"]')" = 1.3 ] || fail "changed tensors may be DELTA_BANDED: 1.3"
  run encode d0.st d1.st -o d11.dcr --format 1.1 --json; want_rc 0 "--format 1.1"
  [ "$(jget o 'j["format"]')" = 1.1 ] || fail "new dtypes need 1.1"
  run apply d0.st d11.dcr -o d3.st; want_rc 0 "apply 1.1"; cmp -s d1.st d3.st || fail "1.1 dtype round trip"
  run apply d0.st d.dcr -o d2.st; want_rc 0 "apply"; cmp -s d1.st d2.st || fail "dtype round trip"
  run encode d0.st d1.st -o d10.dcr --format 1.0; want_rc 2 "--format 1.0 refuses F4"
  run id d0.st; want_rc 0 "id of a file with 1.1 dtypes"
}

t_retry_and_wrong_base() {
  run apply T s.dcr -o OT; want_rc 0 "applied to its own target (a retry)"; same_tree OT T
  run apply T2 s.dcr -o OX; want_rc 1 "another set"; has e DCR_E_BASE_MISMATCH "says base mismatch"
  [ ! -e OX ] || fail "a failed apply leaves no output"
  cp -r B BC && echo '{"changed": true}' > BC/config.json
  run apply BC s.dcr -o OX; want_rc 1 "a base whose config.json differs"; has e DCR_E_BASE_MISMATCH "base mismatch"
  cp -r B BM && rm BM/tokenizer.json
  run apply BM s.dcr -o OX; want_rc 1 "a base without a raw member"; has e DCR_E_BASE_MISMATCH "base mismatch"
  [ -z "$(ls -A . | grep '^\.dcr-')" ] || fail "failed applies left $(ls -A | grep '^\.dcr-')"
}

t_output_rules() {
  run apply B s.dcr -o O; want_rc 2 "an existing output without -f"; has e "use -f" "says -f"
  touch O/stale
  run apply B s.dcr -o O -f; want_rc 0 "-f replaces the directory"; same_tree O T
  run apply B s.dcr -o B -f; want_rc 2 "the base is never the output"; has e "base directory" "says why"
  run apply B s.dcr -o B/new; want_rc 2 "nor inside it"; has e "inside the base" "says why"
  [ ! -e B/new ] || fail "nothing written inside the base"
  run apply B s.dcr -o -; want_rc 2 "a set does not stream"
  ln -s O current
  run apply B s.dcr -o current -f; want_rc 2 "a link is not replaced"; has e "ln -sfn" "says what to do"
  [ "$(readlink current)" = O ] || fail "the link is untouched"
  # in place on a directory (SPEC.md §18.6; cli_refit_test.sh tests it): on a copy, B stays
  rm -rf BI && cp -r B BI && run apply --in-place BI s.dcr; want_rc 0 "in place on a set"
  same_tree BI T; rm -rf BI
  same_tree B "$(python3 "$MKSET" b.st BB >/dev/null && echo BB)"
}

# A kill -9 at any moment of an apply -f over an old set leaves the old set or
# the new one at OUT, whole, and never a mix.
t_crash() {
  "$DCR" synth cb.st ct.st --size 48M --seed 9 -q && python3 "$MKSET" cb.st CB --shards 6 &&
    python3 "$MKSET" ct.st CT --shards 6 || return $(fail "setup")
  run encode CB CT -o c.dcr -q; want_rc 0 "encode" || return
  local old=0 new=0 mixed=0 i
  for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    rm -rf CO && cp -r CB CO
    "$DCR" apply CB c.dcr -o CO -f -q --no-progress & local pid=$!
    sleep "$(printf '0.%03d' $((i * 5)))"; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    if diff -rq CO CB >/dev/null; then old=$((old + 1))
    elif diff -rq CO CT >/dev/null; then new=$((new + 1))
    else mixed=$((mixed + 1)); fi
    for t in .dcr-*; do [ -d "$t" ] && rm -rf "$t"; done
  done
  [ "$mixed" = 0 ] || fail "$mixed of 12 kills left a mixed directory"
  echo "# crash: 12 kills, $old left the old set, $new the new one, 0 a mix"
}

# OUT switched to a link while apply -f runs (the process stopped once its hidden
# directory exists): the link is left as it was, the apply fails, and no hidden
# .dcr-* entry is left (before: the link was replaced, and left as .dcr-XXXXXX).
t_output_becomes_a_link() {
  [ -f c.dcr ] || return $(fail "needs c.dcr from the crash case")
  local tries=0 pid
  rm -rf CL CL.moved && cp -r CB CL
  "$DCR" apply CB c.dcr -o CL -f -q --no-progress --threads 1 >o 2>e & pid=$!
  until ls -A | grep -q '^\.dcr-' || [ $((tries += 1)) -gt 2000 ]; do sleep 0.001; done
  kill -STOP $pid 2>/dev/null || return $(fail "the apply ended before its output could be switched")
  mv CL CL.moved && ln -s CL.moved CL; kill -CONT $pid; wait $pid; RC=$?
  want_rc 3 "an output switched to a link during the apply"; has e "left as it was" "says so"
  [ "$(readlink CL)" = CL.moved ] || fail "the link is left as it was"
  [ -z "$(ls -A | grep '^\.dcr-')" ] || fail "left $(ls -A | grep '^\.dcr-')"
  same_tree CL.moved CB
}

t_refusals() {
  run encode b.st B -o x.dcr; want_rc 2 "a file and a directory"; has e "directory" "says which"
  run encode B/model-00001-of-00004.safetensors T/model-00001-of-00004.safetensors -o x.dcr
  want_rc 2 "two shards that share no tensor"; has e "share no tensor name" "says what it saw"
  has e "--unrelated" "says what to do"
  run encode B/model-00001-of-00004.safetensors T/model-00001-of-00004.safetensors -o x.dcr --unrelated -q -f
  want_rc 0 "--unrelated encodes them anyway"
  run id --raw B/model.safetensors.index.json; want_rc 0 "--raw reads the index as a file"
  run encode --raw B/model.safetensors.index.json T/model.safetensors.index.json -o x.dcr -q -f
  want_rc 0 "raw index"
  # the index as a safetensors file: a hint
  cp B/model.safetensors.index.json idx.json
  run id idx.json; want_rc 1 "an index read as safetensors"; has e "model.safetensors.index.json" "names the likely mistake"
  # an index that disagrees with the shards
  cp -r B BI && python3 - <<'EOF'
import json
p = "BI/model.safetensors.index.json"; j = json.load(open(p))
j["weight_map"]["lm_head.weight"] = "model-00002-of-00004.safetensors"
json.dump(j, open(p, "w"))
EOF
  run encode BI T -o x.dcr -f; want_rc 1 "an index that disagrees"; has e "another shard holds it" "says what"
  cp -r B BL && ln -s ../T BL/linked
  run encode BL T -o x.dcr -f; want_rc 1 "a symlinked directory"; has e "not followed" "says why"
  # the Hugging Face cache: snapshot files are links to blobs
  mkdir -p hf/blobs hf/snapshots/abc && for f in B/*; do [ -f "$f" ] && cp "$f" "hf/blobs/$(basename "$f").blob" &&
    ln -s "../../blobs/$(basename "$f").blob" "hf/snapshots/abc/$(basename "$f")"; done
  cp -r B/tokenizer hf/snapshots/abc/
  [ "$(id_of hf/snapshots/abc)" = "$(id_of B)" ] || fail "a snapshot of links has the set's id"
  run apply hf/snapshots/abc s.dcr -o OH; want_rc 0 "apply to a snapshot of links"; same_tree OH T
}

# More members than the process may open (issue #32): members are opened when
# read or written, a bounded number at a time, so 5000 files go through every
# command under ulimit -n 256 (before, each member held a descriptor throughout).
t_many_members() {
  python3 - <<'EOF' || return $(fail "cannot write the 5000-file sets")
import os
for side in ("MB", "MT"):
    for i in range(5000):
        d = "%s/d%d" % (side, i // 500)
        os.makedirs(d, exist_ok=True)
        with open("%s/f%04d.txt" % (d, i), "wb") as f:
            f.write(b"%d-%d " % (i, side == "MT" and i % 7 == 0) * 3)
EOF
  limited() { (ulimit -n 256 && "$DCR" "$@") >o 2>e; RC=$?; }
  limited encode MB MT -o m.dcr -q; want_rc 0 "encode 5000 members under ulimit -n 256" || return
  limited apply MB m.dcr -o MO; want_rc 0 "apply -o"; same_tree MO MT
  limited validate m.dcr --base MB --target MT; want_rc 0 "validate --base --target"
  limited id MB; want_rc 0 "id"; [ "$(cut -d' ' -f1 o)" = "$(id_of MB)" ] || fail "the id under the limit is the id"
  limited inspect MB; want_rc 0 "inspect"; has o "5000 tensors" "inspect reads every member"
}

tcase "set round trip, moved tensor" t_round_trip
tcase "set state id" t_state_id
tcase "vocabulary growth" t_vocabulary_growth
tcase "raw growth" t_raw_growth
tcase "1.1 dtypes" t_new_dtypes
tcase "retry and wrong bases" t_retry_and_wrong_base
tcase "output rules" t_output_rules
tcase "crash during apply -f" t_crash
tcase "an output switched to a link during apply -f" t_output_becomes_a_link
tcase "refusals" t_refusals
tcase "more members than descriptors" t_many_members
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
