#!/usr/bin/env python3
"""mkchain.py - the checkpoints of a short training run, for the history tests
(standard library only).

  mkchain.py OUTDIR STEPS [--bytes N] [--rate R] [--seed S] [--first K]

Writes OUTDIR/step-K.safetensors .. step-(K+STEPS).safetensors (four digits):
BF16 tensors of about N bytes in all (default 262144), each step changing about
a fraction R (default 0.01) of the elements by one unit in the last place, the
way an optimizer step moves BF16 weights; a few changes of each step undo one
of the step before, so that some elements come back to an earlier value. The
same arguments give the same files.
"""
import argparse
import json
import os
import random
import struct


def write(path, tensors):
    header, offset = {}, 0
    for name, shape, data in tensors:
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, data in tensors:
            f.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("steps", type=int)
    ap.add_argument("--bytes", type=int, default=262144)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    cols = 256
    rows = max(1, a.bytes // 2 // cols // 4)
    tensors = []
    for i, name in enumerate(["embed.weight", "layers.0.mlp.weight", "layers.0.attn.weight", "lm_head.weight"]):
        n = rows * cols
        # N(0, 0.02) rounded to BF16: the top 16 bits of the float32
        data = bytearray(struct.pack("<%dH" % n, *(struct.unpack("<I", struct.pack("<f", rng.gauss(0, 0.02)))[0] >> 16
                                                     for _ in range(n))))
        tensors.append([name, [rows, cols], data])
    os.makedirs(a.outdir, exist_ok=True)
    write(os.path.join(a.outdir, "step-%04d.safetensors" % a.first), tensors)
    last = []
    for step in range(a.first + 1, a.first + a.steps + 1):
        now = []
        for t in tensors:
            data, n = t[2], len(t[2]) // 2
            for _ in range(max(1, int(n * a.rate))):
                e = rng.randrange(n)
                v = data[2 * e] | data[2 * e + 1] << 8
                step_by = rng.choice((1, 0xFFFF))
                v = (v + step_by) & 0xFFFF
                data[2 * e], data[2 * e + 1] = v & 0xFF, v >> 8
                now.append((t, e, step_by))
        for t, e, step_by in last[: len(last) // 50]:  # undo 2% of the last step's changes
            data = t[2]
            v = (data[2 * e] | data[2 * e + 1] << 8) - step_by & 0xFFFF
            data[2 * e], data[2 * e + 1] = v & 0xFF, v >> 8
        last = now
        write(os.path.join(a.outdir, "step-%04d.safetensors" % step), tensors)


if __name__ == "__main__":
    main()
