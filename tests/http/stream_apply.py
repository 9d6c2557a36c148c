#!/usr/bin/env python3
"""stream_apply.py BASE TARGET BUNDLE WWW URL - the Python apply from a URL, which
fetches and applies at once (issue #34 item 2), against a real origin: WWW is the
origin's directory, URL its address ("http://127.0.0.1:PORT"), BUNDLE takes BASE to
TARGET and is served there as step.dcr. Checks, at verify "full" and "chunk":

  exact    Bundle(URL).apply_to gives the arrays that Bundle(BUNDLE).apply_to gives
           (a local file), and those are TARGET's
  corrupt  the bundle with its last chunk's payload changed (streamcorrupt.dcr):
           DCR_E_CHECKSUM, raised after the chunks before it were fetched (mid-
           stream), and the caller's arrays are byte for byte as they were
  base     a base changed in the last changed chunk's region: DCR_E_BASE_MISMATCH,
           the arrays as they were

Prints one "ok - ..." line a check; exits 1 at the first failure.
"""
import shutil
import sys

import numpy as np

import dcr

base, target, bundle, www, url = sys.argv[1:6]


def fail(msg):
    print(f"not ok - {msg}")
    sys.exit(1)


def snapshot(w):
    return {k: np.array(v, copy=True) for k, v in w.items()}


def same(a, b):
    return a.keys() == b.keys() and all(
        a[k].view(np.uint8).tobytes() == b[k].view(np.uint8).tobytes() for k in a)


want = dcr.load_checkpoint(target)
with dcr.Bundle(bundle) as b:
    last = max(b.chunks, key=lambda c: c.offset)  # the last chunk in data order
    chunk_size = b.info.chunk_size
shutil.copyfile(bundle, f"{www}/streamcorrupt.dcr")
with open(f"{www}/streamcorrupt.dcr", "r+b") as f:  # one payload byte, past the record
    f.seek(last.offset + 32 + last.payload_length - 1)
    byte = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([byte[0] ^ 0x10]))

for verify in ("full", "chunk"):
    local = dcr.load_checkpoint(base)
    dcr.Bundle(bundle).apply_to(local, verify=verify)
    streamed = dcr.load_checkpoint(base)
    with dcr.Bundle(f"{url}/step.dcr") as b:
        b.apply_to(streamed, verify=verify)
    if not same(streamed, local):
        fail(f"{verify}: the apply from the URL differs from the apply from the file")
    if not same(streamed, want):
        fail(f"{verify}: the apply from the URL is not the target")
    print(f"ok - {verify}: apply from the URL exact (= the file's apply = the target)")

    w = dcr.load_checkpoint(base)
    before = snapshot(w)
    b = dcr.Bundle(f"{url}/streamcorrupt.dcr")
    try:
        b.apply_to(w, verify=verify)
        fail(f"{verify}: a corrupt last chunk was applied")
    except dcr.Error as e:
        if e.name != "DCR_E_CHECKSUM":
            fail(f"{verify}: a corrupt last chunk gave {e.name}: {e}, not DCR_E_CHECKSUM")
        fetched = b.fetch_stats.bytes_fetched
    b.close()
    if fetched <= last.offset:
        fail(f"{verify}: only {fetched} bytes fetched when the corrupt chunk at {last.offset} was refused")
    if not same(w, before):
        fail(f"{verify}: a corrupt last chunk changed the caller's arrays")
    print(f"ok - {verify}: a corrupt last chunk: DCR_E_CHECKSUM after {fetched} bytes, arrays untouched")

    w = dcr.load_checkpoint(base)
    arr = w[last.tensor_name].view(np.uint8).reshape(-1)
    arr[last.chunk * chunk_size] ^= 1  # in the last changed chunk's region
    before = snapshot(w)
    try:
        with dcr.Bundle(f"{url}/step.dcr") as b:
            b.apply_to(w, verify=verify)
        fail(f"{verify}: a wrong base was patched")
    except dcr.BaseMismatchError:
        pass
    if not same(w, before):
        fail(f"{verify}: a wrong base: the caller's arrays changed")
    print(f"ok - {verify}: a wrong base (in the last changed chunk): DCR_E_BASE_MISMATCH, arrays untouched")
