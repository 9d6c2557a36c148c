"""Bundles at HTTP URLs (SPEC.md §21): Bundle(url) against a real HTTP server on
the loopback interface (Python's own http.server, which answers Range requests
with 206 here, and 200 when told to ignore them), applied in memory and
checked; faults raise FetchError or ChangedError."""

import http.server
import os
import threading

import numpy as np
import pytest
from conftest import cli

import dcr


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b""
    etag = '"1"'
    ignore_range = False
    seen_headers = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        Handler.seen_headers.append(dict(self.headers))
        if self.path.startswith("/missing"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body, n = Handler.body, len(Handler.body)
        rng = self.headers.get("Range")
        match = self.headers.get("If-Match")
        if match and match != Handler.etag:
            self.send_response(412)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if rng and not Handler.ignore_range:
            spec = rng.split("=", 1)[1]
            a, b = spec.split("-")
            first, last = (n - int(b), n - 1) if a == "" else (int(a), int(b) if b else n - 1)
            first, last = max(first, 0), min(last, n - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{n}")
            part = body[first:last + 1]
        else:
            self.send_response(200)
            part = body
        self.send_header("Content-Length", str(len(part)))
        self.send_header("ETag", Handler.etag)
        self.end_headers()
        self.wfile.write(part)


@pytest.fixture()
def server(pair):
    base, target, bundle = pair
    Handler.body = open(bundle, "rb").read()
    Handler.etag, Handler.ignore_range, Handler.seen_headers = '"1"', False, []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", base, target
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A bundle of about 180 KB: more than the first request (the last 64 KiB)."""
    d = tmp_path_factory.mktemp("http")
    base, target, bundle = (str(d / n) for n in ("a.safetensors", "b.safetensors", "s.dcr"))
    cli("synth", base, target, "--size", "32M", "--seed", "7", "-q")
    cli("encode", base, target, "-o", bundle, "-q")
    assert os.path.getsize(bundle) > 128 << 10
    return base, target, bundle


@pytest.mark.parametrize("ignore_range", [False, True])
def test_apply_from_url(server, ignore_range):
    url, base, target = server
    Handler.ignore_range = ignore_range
    tensors = dcr.load_safetensors(base)
    want = dcr.load_safetensors(target)
    with dcr.Bundle(url + "/s.dcr?sig=secret", headers={"Authorization": "Bearer tok"}) as b:
        assert b.info.bundle_size == len(Handler.body)
        b.apply_to(tensors, verify="full")
        s = b.fetch_stats
    assert s.bundle_size == len(Handler.body) and s.bytes_fetched >= s.bundle_size and s.requests >= 1
    for name, arr in want.items():
        assert np.array_equal(np.asarray(tensors[name]).view(np.uint8), np.asarray(arr).view(np.uint8)), name
    assert all(h.get("Authorization") == "Bearer tok" for h in Handler.seen_headers)


def test_missing_is_fetch_error_without_the_query(server):
    url, _, _ = server
    with pytest.raises(dcr.FetchError) as e:
        dcr.Bundle(url + "/missing.dcr?X-Amz-Signature=secret", http_retries=0)
    assert "404" in str(e.value) and "secret" not in str(e.value) and "secret" not in e.value.detail.file


def test_changed_object(server):
    url, base, _ = server
    with dcr.Bundle(url + "/s.dcr") as b:
        Handler.etag = '"2"'  # replaced on the origin after the footer and index were read
        with pytest.raises(dcr.ChangedError):
            b.apply_to(dcr.load_safetensors(base), verify="chunk")


def test_url_options_need_a_url(pair):
    with pytest.raises(dcr.ArgumentError):
        dcr.Bundle(pair[2], headers={"A": "b"})


def test_select_fetches_a_slice(server):
    """A tensor-parallel worker: two tensors patched from a URL, the rest of the
    bundle never fetched."""
    url, base, target = server
    full = dcr.load_safetensors(base)
    want = dcr.load_safetensors(target)
    with dcr.Bundle(url + "/s.dcr") as b:
        names = [t.name for t in b.tensors if t.changed_chunks][:2]
        assert b.select(*names) == 2
        assert [t.name for t in b.tensors if t.selected] == names
        mine = {n: full[n].copy() for n in names}
        stats = b.apply_to(mine, verify="full")
        assert stats.chunks_patched == sum(t.changed_chunks for t in b.tensors if t.selected)
        fetched = b.fetch_stats
        with pytest.raises(dcr.ArgumentError):
            b.check_target(target)
        with pytest.raises(dcr.ArgumentError):
            b.select("no-such-tensor*")
        assert b.select() == len(b.tensors)
    assert fetched.bytes_fetched < fetched.bundle_size
    for n in names:
        assert np.array_equal(mine[n].view(np.uint8), np.asarray(want[n]).view(np.uint8)), n
