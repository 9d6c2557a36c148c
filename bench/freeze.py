#!/usr/bin/env python3
"""freeze.py BASE TARGET OUT [PATTERN...] - writes OUT: TARGET with the tensors whose
name contains any PATTERN (default: mlp, embed) given back their bytes from BASE, as
if those layers were frozen during the step. BASE and TARGET must share a layout
(a `dcr synth` pair does). For benchmarks of refits that leave chunks unchanged."""
import json
import struct
import sys

base_path, target_path, out_path = sys.argv[1:4]
patterns = sys.argv[4:] or ["mlp", "embed"]
base = open(base_path, "rb").read()
target = bytearray(open(target_path, "rb").read())
n = struct.unpack("<Q", base[:8])[0]
header = json.loads(base[8:8 + n])
start = 8 + n
frozen = total = 0
for name, t in header.items():
    if name == "__metadata__":
        continue
    s, e = t["data_offsets"]
    total += e - s
    if any(p in name for p in patterns):
        target[start + s:start + e] = base[start + s:start + e]
        frozen += e - s
open(out_path, "wb").write(target)
print("%s: %.1f%% of the tensor bytes frozen" % (out_path, 100.0 * frozen / total))
