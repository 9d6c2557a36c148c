#!/usr/bin/python3
"""bench_apply.py - the overhead of dcr's Python apply_to over the C memory apply.

    DCR_LIBRARY=build-hP/libdcr.so.1 /usr/bin/python3 python/tools/bench_apply.py \
        BASE TARGET [--runs N] [--threads N]

Encodes BASE -> TARGET, loads BASE into one buffer (one numpy view per tensor),
and times, for each verification level, Bundle.apply_to on that dict against
dcr_patch_memory called from C on the same buffer with the same threads (a small
C helper compiled here with cc against include/dcr.h, timing itself with
clock_gettime), runs interleaved so that both see the same machine load. The
buffer is reset to the base between runs (not timed). Prints medians, and the
overhead of Python as a percentage of the C time.
"""

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import dcr  # noqa: E402

C_HELPER = r"""
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dcr.h"

typedef struct { unsigned char *data; uint64_t prefix; uint64_t n; uint64_t *off, *len; } held;

static int resolve(void *opaque, uint64_t entry, const dcr_tensor_info *t, dcr_buffer *b) {
  (void)t;
  held *h = opaque;
  if (entry >= h->n) return 1;
  b->data = h->data + h->prefix + h->off[entry];
  b->size = h->len[entry];
  return 0;
}

/* Times one dcr_patch_memory of the bundle into data (the base file's bytes):
 * entry i of the bundle is the checkpoint's tensor of the same name. */
double c_apply(dcr_reader *r, unsigned char *data, const char *base, int level, unsigned threads) {
  dcr_checkpoint *ck = NULL;
  dcr_checkpoint_summary cs;
  dcr_bundle_info bi;
  if (dcr_checkpoint_open(&ck, base, DCR_KIND_SAFETENSORS, NULL, NULL)) return -1;
  dcr_checkpoint_info(ck, &cs);
  dcr_reader_info(r, &bi);
  held h = {data, cs.prefix_length, bi.entry_count, calloc(bi.entry_count + 1, 8), calloc(bi.entry_count + 1, 8)};
  for (uint64_t i = 0; i < bi.entry_count; i++) {
    dcr_tensor_info t;
    dcr_reader_tensor(r, i, &t);
    for (uint64_t k = 0; k < cs.tensor_count; k++) {
      dcr_tensor_side s;
      const char *name;
      size_t len;
      dcr_checkpoint_tensor(ck, k, &s, &name, &len);
      if (len == t.name_length && !memcmp(name, t.name, len)) { h.off[i] = s.offset; h.len[i] = s.byte_length; }
    }
  }
  dcr_patch *p = NULL;
  double dt = -1;
  if (!dcr_patch_create(&p, r, NULL)) {
    dcr_patch_set_verify(p, level);
    dcr_patch_set_threads(p, threads);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = dcr_patch_memory(p, resolve, &h, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    dt = rc ? -1 : (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
  }
  dcr_patch_free(p);
  dcr_checkpoint_free(ck);
  free(h.off), free(h.len);
  return dt;
}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("target")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dcr-bench-")
    src, so = os.path.join(tmp, "c_apply.c"), os.path.join(tmp, "c_apply.so")
    with open(src, "w") as f:
        f.write(C_HELPER)
    libdir = os.path.dirname(os.path.abspath(dcr.library_path))
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-I", os.path.join(ROOT, "include"), src, "-o", so,
                    dcr.library_path, f"-Wl,-rpath,{libdir}"], check=True)
    helper = ctypes.CDLL(so)
    helper.c_apply.restype = ctypes.c_double
    helper.c_apply.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint]

    data, _ = dcr.encode_bytes(a.base, a.target)
    bundle = dcr.Bundle(data)
    with open(a.base, "rb") as f:
        pristine = np.frombuffer(f.read(), np.uint8)
    work = pristine.copy()
    n = int.from_bytes(bytes(work[:8]), "little")
    prefix = 8 + n
    import json

    header = json.loads(bytes(work[8:prefix]))
    header.pop("__metadata__", None)
    views = {k: work[prefix + e["data_offsets"][0]: prefix + e["data_offsets"][1]] for k, e in header.items()}
    target = np.fromfile(a.target, np.uint8)
    threads = a.threads or dcr.default_threads()
    print(f"{os.path.getsize(a.base) / 2**20:.0f} MiB checkpoint, {len(views)} tensors, bundle {len(data)} bytes, "
          f"{threads} threads, {a.runs} runs each (interleaved), medians:")
    print(f"{'verify':7} {'C (ms)':>9} {'Python (ms)':>12} {'overhead':>9}")
    levels = {"full": 0, "chunk": 1, "none": 2}
    reader = bundle._reader
    for name, level in levels.items():
        tc, tp = [], []
        for _ in range(a.runs):
            np.copyto(work, pristine)
            t = helper.c_apply(reader, work.ctypes.data, os.fsencode(a.base), level, threads)
            if t < 0 or not np.array_equal(work, target):
                print("C apply failed")
                return 1
            tc.append(t)
            np.copyto(work, pristine)
            t0 = time.perf_counter()
            bundle.apply_to(views, name, threads=threads)
            tp.append(time.perf_counter() - t0)
            if not np.array_equal(work, target):
                print("Python apply gave a wrong result")
                return 1
        c, p = statistics.median(tc), statistics.median(tp)
        print(f"{name:7} {c * 1e3:9.2f} {p * 1e3:12.2f} {100 * (p - c) / c:8.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
