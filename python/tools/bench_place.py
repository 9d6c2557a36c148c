#!/usr/bin/python3
"""bench_place.py - applying into placements against applying into whole tensors,
for the same changed bytes.

    DCR_LIBRARY=build/libdcr.so.1 /usr/bin/python3 python/tools/bench_place.py \
        BASE TARGET [--runs N] [--threads N] [--format 1.1|1.3]

Encodes BASE -> TARGET (safetensors), loads BASE, and times, interleaved so that
each sees the same machine load, Bundle.apply_to at verify="chunk" on
  - whole:  every tensor as one array (dcr_patch_memory);
  - rows:   every tensor held as two row blocks, each in its own buffer
            (column-parallel slices of two ranks, held by one worker);
  - cols:   every 2-D tensor held as two column blocks (row-parallel slices of two
            ranks, held by one worker);
  - half:   one rank: the first column block of every 2-D tensor only, with the
            whole base given (base=), which format 1.3 needs for a chunk held in
            part (it changes about half the bytes the others do).
Every run starts from the base (reset not timed) and every result is compared
with the target. Prints medians of wall and process CPU seconds, and each
placed case's ratio to whole.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import dcr  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("target")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--format", default=None)
    a = ap.parse_args()
    base = dcr.load_safetensors(a.base)
    target = dcr.load_safetensors(a.target)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "b.dcr")
        dcr.encode(a.base, a.target, out, **({"format": a.format} if a.format else {}))
        bundle = dcr.Bundle(out)
        print(f"bundle {bundle.info.bundle_size} bytes, format {bundle.info.format_version}, "
              f"{bundle.info.chunk_count} chunks, threads {a.threads}")

        whole = {n: v.copy() for n, v in base.items()}
        halves = {}
        for n, v in base.items():
            rows = v.shape[0] if v.ndim else 1
            if rows < 2:
                continue
            top, bottom = v[: rows // 2].copy(), v[rows // 2:].copy()
            halves[n] = (top, bottom)
        cols = {}
        for n, v in base.items():
            if v.ndim == 2 and v.shape[1] >= 2:
                c = v.shape[1] // 2
                cols[n] = (v[:, :c].copy(), v[:, c:].copy())

        def reset() -> None:
            for n, v in base.items():
                whole[n][...] = v
                if n in halves:
                    r = v.shape[0] // 2
                    halves[n][0][...] = v[:r]
                    halves[n][1][...] = v[r:]
                if n in cols:
                    c = v.shape[1] // 2
                    cols[n][0][...] = v[:, :c]
                    cols[n][1][...] = v[:, c:]

        def run_whole() -> None:
            bundle.apply_to(whole, threads=a.threads)

        def run_rows() -> None:
            m = {}
            for n, v in base.items():
                if n in halves:
                    r = v.shape[0]
                    m[n] = [dcr.Place(halves[n][0], rows=(0, r // 2)), dcr.Place(halves[n][1], rows=(r // 2, r))]
                else:
                    m[n] = whole[n]
            bundle.apply_to(m, threads=a.threads)

        def run_cols() -> None:
            m = {}
            for n, v in base.items():
                if n in cols:
                    c = v.shape[1]
                    m[n] = [dcr.Place(cols[n][0], cols=(0, c // 2)), dcr.Place(cols[n][1], cols=(c // 2, c))]
                else:
                    m[n] = whole[n]
            bundle.apply_to(m, threads=a.threads)

        def run_half() -> None:
            m = {}
            for n, v in base.items():
                if n in cols:
                    m[n] = dcr.Place(cols[n][0], cols=(0, v.shape[1] // 2))
                else:
                    m[n] = whole[n]
            bundle.apply_to(m, threads=a.threads, base=base)

        def check(case: str) -> None:
            for n, v in target.items():
                if case == "rows" and n in halves:
                    got = np.concatenate(halves[n])
                elif case == "cols" and n in cols:
                    got = np.concatenate(cols[n], axis=1)
                elif case == "half" and n in cols:
                    assert np.array_equal(cols[n][0], v[:, : v.shape[1] // 2]), (case, n)
                    continue
                else:
                    got = whole[n]
                assert np.array_equal(got, v), (case, n)

        cases = {"whole": run_whole, "rows": run_rows, "cols": run_cols, "half": run_half}
        times = {k: [] for k in cases}
        for _ in range(a.runs):
            for k, fn in cases.items():
                reset()
                w0, c0 = time.perf_counter(), time.process_time()
                fn()
                times[k].append((time.perf_counter() - w0, time.process_time() - c0))
                check(k)
        med = {k: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)) for k, v in times.items()}
        for k, (w, c) in med.items():
            print(f"{k:6s} wall {w:.3f} s  cpu {c:.3f} s  x{w / med['whole'][0]:.2f} wall  x{c / med['whole'][1]:.2f} cpu")


if __name__ == "__main__":
    main()
