"""apply_to releases the GIL: a Python thread keeps running while a large model is
patched (and checked) in C."""

import threading
import time

import numpy as np
import pytest
from conftest import cli

import dcr


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    d = tmp_path_factory.mktemp("large")
    b, t = str(d / "base.safetensors"), str(d / "target.safetensors")
    cli("synth", b, t, "--size", "64M", "--rate", "0.01", "--seed", "2", "-q")
    return dcr.Bundle(dcr.encode_bytes(b, t)[0]), dcr.load_safetensors(b), dcr.load_safetensors(t)


def count_while(fn):
    """Runs fn while a thread counts; returns (count, seconds)."""
    stop = threading.Event()
    n = [0]

    def counter():
        while not stop.is_set():
            n[0] += 1

    th = threading.Thread(target=counter)
    th.start()
    time.sleep(0.02)  # the counter is running
    start = n[0]
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    got = n[0] - start
    stop.set()
    th.join()
    return got, dt


def test_apply_to_releases_the_gil(large):
    b, w, t = large
    pristine = {k: v.copy() for k, v in w.items()}
    durations = []
    for attempt in range(3):
        for k in w:
            np.copyto(w[k], pristine[k])
        # the counter's own rate with the main thread idle (GIL free), then during
        # the apply; one C thread, so that a core is left for the counter
        solo, solo_dt = count_while(lambda: time.sleep(0.1))
        during, dt = count_while(lambda: b.apply_to(w, "full", threads=1))
        durations.append(dt)
        rate, rate_during = solo / solo_dt, during / dt
        if rate_during > 0.2 * rate:
            break
    else:
        pytest.fail(f"the counter advanced {during} times in {dt:.3f} s of apply_to, "
                    f"against {rate:.0f}/s alone: the GIL is held")
    assert dt > 0.02  # long enough to tell
    assert all(w[k].tobytes() == t[k].tobytes() for k in t)


def test_a_gil_holding_call_would_fail_this_test():
    """The measurement can fail: a loop that holds the GIL stops the counter."""
    def busy():
        t0 = time.perf_counter()
        x = 0
        while time.perf_counter() - t0 < 0.1:
            x += 1
    import sys

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.5)  # longer than the loop: the main thread keeps the GIL
    try:
        during, dt = count_while(busy)
    finally:
        sys.setswitchinterval(old)
    solo, solo_dt = count_while(lambda: time.sleep(0.1))
    assert during / dt < 0.2 * solo / solo_dt


def test_concurrent_applies_on_one_bundle(large):
    """Calls on one Bundle from several threads are serialized, and correct."""
    b, w, t = large
    results = []
    copies = [{k: v.copy() for k, v in w.items()} for _ in range(2)]
    # copies hold the base or (after the first test) the target: both end as target
    threads = [threading.Thread(target=lambda c=c: results.append(b.apply_to(c, "chunk"))) for c in copies]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 2
    for c in copies:
        assert all(c[k].tobytes() == t[k].tobytes() for k in t)
