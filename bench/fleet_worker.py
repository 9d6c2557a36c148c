#!/usr/bin/env python3
"""fleet_worker.py - one rollout worker of bench/fleet.sh: it holds a checkpoint's
weights in memory and refits them when told to.

  fleet_worker.py NAME CMD_FIFO DONE_FIFO WORK_DIR [VERIFY]

VERIFY is apply_to's verify (default "chunk", the library's): see refit_dcr.

Started once and kept running, so that neither the interpreter's start nor the
first load is in a step's time. Reads commands from CMD_FIFO, one a line, and
answers each with one line on DONE_FIFO (shared by the workers: one write of
less than PIPE_BUF bytes, so lines never mix):

  load PATH     dcr.load_checkpoint(PATH) becomes the weights held (set-up, untimed)
  dcr URL ID    dcr.Bundle(URL) (read by range requests) .apply_to(weights,
                verify=VERIFY), and the bundle's target state must be ID
  full URL ID   downloads URL to WORK_DIR/NAME.safetensors, loads it with
                dcr.load_safetensors (it becomes the weights held) and checks that
                dcr.state_id of the file is ID

  applytime PATH
                the time of dcr.Bundle(PATH).apply_to(weights, verify=VERIFY),
                a local file, after which the weights are put back as they were
  overlap PATH FETCH_URL STREAM_URL ID
                the overlap of fetch and apply (issue #34 item 2), three times
                taken one after the other: the apply of PATH as applytime, the
                download of FETCH_URL (the bundle's bytes, one GET), then the
                apply from STREAM_URL as for dcr, which fetches and applies at once

The answer is "NAME KIND SECONDS PART_SECONDS BYTES ok" (SECONDS: the command's
whole time; PART_SECONDS: opening the bundle and reading its index for dcr, the
download for full; BYTES: fetched from the relay) or "NAME KIND 0 0 0 error:
MESSAGE", after which the worker goes on; for applytime "NAME applytime SECONDS 0 0
ok", for overlap "NAME overlap STREAMED_SECONDS APPLY_SECONDS FETCH_SECONDS ok".
"""
import os
import shutil
import sys
import time
import urllib.request

import numpy as np

import dcr

VERIFY = sys.argv[5] if len(sys.argv) > 5 else "chunk"


def refit_dcr(weights, url, target):
    t0 = time.monotonic()
    bundle = dcr.Bundle(url)
    opened = time.monotonic() - t0
    # "chunk" checks each changed chunk against its base digest before anything is
    # written and its result against its target digest; the chunks a bundle does not
    # carry are the base's, which the load (its state id) and every step before
    # proved, so the weights are the bundle's target state. "full" hashes every
    # tensor the bundle names, before and after, and proves it without that chain.
    bundle.apply_to(weights, verify=VERIFY)
    if bundle.target_state != target:
        raise ValueError(f"the bundle's target is {bundle.target_state}, not {target}")
    return weights, opened, bundle.fetch_stats.bytes_fetched


def apply_time(weights, path):
    """Seconds to apply the bundle at path to the weights; the weights are then
    put back (untimed), so that they stay the bundle's base."""
    kept = {name: np.array(a, copy=True) for name, a in weights.items()}
    t0 = time.monotonic()
    dcr.Bundle(path).apply_to(weights, verify=VERIFY)
    seconds = time.monotonic() - t0
    for name, a in kept.items():
        np.copyto(weights[name], a)
    return seconds


def overlap(weights, path, fetch_url, stream_url, target):
    applied = apply_time(weights, path)
    t0 = time.monotonic()
    with urllib.request.urlopen(fetch_url) as r:
        while r.read(1 << 20):
            pass
    fetched = time.monotonic() - t0
    t0 = time.monotonic()
    refit_dcr(weights, stream_url, target)
    return time.monotonic() - t0, applied, fetched


def refit_full(path, url, target):
    t0 = time.monotonic()
    with urllib.request.urlopen(url) as r, open(path, "wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)
    downloaded = time.monotonic() - t0
    try:
        weights = dcr.load_safetensors(path)
        got = dcr.state_id(path)
        size = os.path.getsize(path)
    finally:
        os.unlink(path)
    if got != target:
        raise ValueError(f"the checkpoint's state is {got}, not {target}")
    return weights, downloaded, size


def main():
    name, cmd_fifo, done_fifo, work = sys.argv[1:5]
    done = os.open(done_fifo, os.O_WRONLY)
    weights = None
    with open(cmd_fifo) as commands:
        for line in commands:
            kind, *args = line.split()
            t0 = time.monotonic()
            try:
                if kind == "applytime":
                    answer = f"{name} {kind} {apply_time(weights, args[0]):.4f} 0 0 ok"
                elif kind == "overlap":
                    streamed, applied, fetched = overlap(weights, *args)
                    answer = f"{name} {kind} {streamed:.4f} {applied:.4f} {fetched:.4f} ok"
                else:
                    if kind == "load":
                        weights, part, size = dcr.load_checkpoint(args[0]), 0.0, 0
                    elif kind == "dcr":
                        weights, part, size = refit_dcr(weights, *args)
                    else:
                        weights, part, size = refit_full(os.path.join(work, name + ".safetensors"), *args)
                    answer = f"{name} {kind} {time.monotonic() - t0:.4f} {part:.4f} {size} ok"
            except Exception as e:  # reported to the driver, which fails the run
                answer = f"{name} {kind} 0 0 0 error: {type(e).__name__}: {e}"
            os.write(done, (answer.replace("\n", " ")[:500] + "\n").encode())


if __name__ == "__main__":
    main()
