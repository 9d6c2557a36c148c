#!/usr/bin/python3
"""faultserver.py - an HTTP/1.1 origin for dcr's HTTP tests, with faults on demand.

usage: faultserver.py [--root DIR] [--port N] [--bind ADDR] [--log FILE]
                      [--stall-seconds S]

Serves the files under --root (default: the current directory) with GET and
HEAD, keep-alive, Content-Length on every answer, single-range requests
(Range: bytes=a-b, bytes=a-, bytes=-n: 206 with Content-Range; 416 with
"Content-Range: bytes */SIZE" when unsatisfiable; several ranges or a malformed
one are ignored: 200 with the whole file, as RFC 9110 allows), a strong ETag
(quoted hex of size, mtime_ns and inode) and Last-Modified, If-Match (412 when
no tag matches; "*" matches any file) and If-Range (an ETag, compared strongly,
or an HTTP date, compared exactly: the whole file with 200 when it does not
match).  When ready it prints the port it listens on, one line on stdout.

A fault is chosen by the path's first two segments, /FAULT/N/FILE:

  drop/N/F        send the headers and about half the body, then close the
                  connection (a premature end of the body)
  503/N/F         answer 503 with Retry-After: 0
  reset/N/F       close the connection (with a TCP reset) without answering
  norange/N/F     ignore Range: 200 with the whole file (always; N ignored)
  stall/N/F       send the headers and part of the body, then sleep
                  --stall-seconds (default 30) and close
  change/N/F      serve F for the first N requests, then F.next (its own
                  ETag and Last-Modified): the object changes under the reader
  wrongrange/N/F  a 206 whose Content-Range is one byte off what was asked
                  (the bytes it names are the bytes sent)
  redirect/N/F    302 to /F (the same host, the query string kept; F may be
                  another fault's path)
  auth/N/F        401 unless "Authorization: Bearer s3cr3t-token" (always)
  404/N/F         404 (always)
  away/N/F        302 to http://127.0.0.1:N/F: another origin, port N (always;
                  the query string kept; F may be another fault's path)
  announce/N/F    200 whatever the Range, announcing N bytes (Content-Length:
                  N), then F's bytes and zeros up to N, as fast as the client
                  takes them (always)
  errbody/N/F     503 with an N-byte body of zeros, as fast as the client takes
                  it (always)
  trickle/N/F     the usual answer, status line and headers included, sent N
                  bytes a second (always)

Every fault but norange, auth, 404, away, announce, errbody and trickle applies to the first N requests to that
path (counted per path and query string: add "?case=NAME" to count afresh);
later ones are served normally.  drop and stall count only GET requests that would carry at least 2
body bytes (a HEAD or a 1-byte body is served normally and not counted).
GET /_reset forgets every count.  Any other path is a file under the root.

--log FILE gets one line per request, flushed at once:
  METHOD PATH RANGE STATUS BODY_BYTES_SENT t=SECONDS [NOTE]
with "-" for a request without Range, status 0 for a connection reset without
an answer, SECONDS since the server started (when the answer, or the part of
it sent, was written), and the note naming the fault applied.  For announce
and errbody, BODY_BYTES_SENT counts what the client's socket accepted before it
closed the connection.
"""

import argparse
import email.utils
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "Bearer s3cr3t-token"
FAULTS = {"drop", "503", "reset", "norange", "stall", "change", "wrongrange",
          "redirect", "auth", "404", "away", "announce", "errbody", "trickle"}
ALWAYS = {"norange", "auth", "404", "away", "announce", "errbody", "trickle"}  # N is no count
BODY_FAULTS = {"drop", "stall"}            # count only GETs with a body


class State:
    def __init__(self, root, log, stall):
        self.root = os.path.realpath(root)
        self.stall = stall
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.counts = {}
        self.log = open(log, "a", buffering=1) if log else None

    def bump(self, key):
        """The 1-based number of this request to KEY."""
        with self.lock:
            n = self.counts.get(key, 0) + 1
            self.counts[key] = n
            return n

    def peek(self, key):
        with self.lock:
            return self.counts.get(key, 0)

    def reset(self):
        with self.lock:
            self.counts.clear()

    def write_log(self, line):
        if self.log:
            with self.lock:
                self.log.write(line + "\n")
                self.log.flush()


def etag_of(st):
    return '"%x-%x-%x"' % (st.st_size, st.st_mtime_ns, st.st_ino)


def parse_range(value, size):
    """(first, last) for one satisfiable range, "unsatisfiable", or None when the
    header is to be ignored (absent, malformed, several ranges, not bytes)."""
    if value is None:
        return None
    value = value.strip()
    if not value.lower().startswith("bytes="):
        return None
    spec = value[6:].strip()
    if "," in spec or "-" not in spec:
        return None
    a, b = (s.strip() for s in spec.split("-", 1))
    try:
        if a == "":
            if not b.isdigit():
                return None
            n = int(b)
            if n == 0 or size == 0:
                return "unsatisfiable"
            return (max(0, size - n), size - 1)
        if not a.isdigit() or (b and not b.isdigit()):
            return None
        first = int(a)
        last = int(b) if b else size - 1
    except ValueError:
        return None
    if last < first:
        return None
    if first >= size:
        return "unsatisfiable"
    return (first, min(last, size - 1))


def etag_list(value):
    """The entity tags of an If-Match value (weak ones kept with their W/)."""
    tags, i, n = [], 0, len(value)
    while i < n:
        while i < n and value[i] in " \t,":
            i += 1
        if i >= n:
            break
        start = i
        if value.startswith("W/", i):
            i += 2
        if i < n and value[i] == '"':
            j = value.find('"', i + 1)
            if j < 0:
                j = n - 1
            i = j + 1
            tags.append(value[start:i])
        else:
            j = value.find(",", i)
            j = n if j < 0 else j
            tags.append(value[start:j].strip())
            i = j
    return tags


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "dcr-faultserver/1"
    sys_version = ""

    def version_string(self):
        return self.server_version

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def log_message(self, fmt, *args):  # quiet on stderr
        pass

    # -- helpers -------------------------------------------------------------
    def note(self, status, sent, note=""):
        rng = self.headers.get("Range") or "-"
        self.server.state.write_log("%s %s %s %d %d t=%.3f%s" % (
            self.command, self.path, rng.replace(" ", ""), status, sent,
            time.monotonic() - self.server.state.t0, (" " + note) if note else ""))

    def simple(self, status, text, extra=(), note=""):
        body = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        sent = 0
        if self.command != "HEAD":
            self.wfile.write(body)
            sent = len(body)
        self.note(status, sent, note)

    def reset_connection(self):
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    def send_bytes(self, f, first, count, rate=0):
        """Write COUNT bytes of F from FIRST (RATE bytes a second if RATE); the
        number written."""
        f.seek(first)
        sent = 0
        step = max(1, rate // 10) if rate else 1 << 16
        while sent < count and not self.server.stopping:
            buf = f.read(min(step, count - sent))
            if not buf:
                break
            self.wfile.write(buf)
            sent += len(buf)
            if rate:
                time.sleep(len(buf) / rate)
        return sent

    def send_flood(self, status, f, count, validators, note):
        """Answer STATUS announcing COUNT body bytes: F's bytes (if F), then
        zeros, as fast as the client takes them; log what its socket accepted."""
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(count))
        for k, v in validators:
            self.send_header(k, v)
        self.end_headers()
        sent = 0
        zeros = bytes(1 << 20)
        try:
            while sent < count and not self.server.stopping:
                buf = f.read(min(1 << 20, count - sent)) if f is not None else b""
                buf = buf or zeros[:min(len(zeros), count - sent)]
                self.wfile.write(buf)
                sent += len(buf)
        finally:
            self.close_connection = True
            self.note(status, sent, note)

    # -- requests ------------------------------------------------------------
    def do_HEAD(self):
        self.handle_any()

    def do_GET(self):
        self.handle_any()

    def handle_any(self):
        try:
            self.serve()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except OSError:
            self.close_connection = True

    def serve(self):
        st = self.server.state
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        if path == "/_reset":
            st.reset()
            return self.simple(200, "reset")
        parts = path.lstrip("/").split("/")
        fault, count, rel = None, 0, path.lstrip("/")
        if len(parts) >= 3 and parts[0] in FAULTS and parts[1].isdigit():
            fault, count, rel = parts[0], int(parts[1]), "/".join(parts[2:])
        fname = os.path.realpath(os.path.join(st.root, rel))
        if not (fname == st.root or fname.startswith(st.root + os.sep)) or \
                not (os.path.isfile(fname) or fault in ("redirect", "away")):
            return self.simple(404, "not found", note="nofile")

        # faults decided before looking at the file's contents
        active = None
        if fault in ALWAYS:
            active = fault
        elif fault in BODY_FAULTS:
            active = fault            # decided once the body's size is known
        elif fault is not None:
            n = st.bump(self.path)
            if n <= count:
                active = fault
            elif fault == "change":
                fname = fname + ".next"   # the object has changed
                if not os.path.isfile(fname):
                    return self.simple(404, "no .next file", note="change")

        if active == "404":
            return self.simple(404, "not found", note="404")
        if active == "auth" and self.headers.get("Authorization") != TOKEN:
            return self.simple(401, "unauthorized",
                               [("WWW-Authenticate", 'Bearer realm="dcr-test"')], note="auth")
        if active == "503":
            return self.simple(503, "unavailable", [("Retry-After", "0")], note="503")
        if active == "reset":
            self.note(0, 0, "reset")
            return self.reset_connection()
        if active == "errbody":
            return self.send_flood(503, None, count, (), "errbody")
        if active == "away":
            loc = "http://127.0.0.1:%d/%s" % (count, urllib.parse.quote(rel))
            if url.query:
                loc += "?" + url.query
            return self.simple(302, "found", [("Location", loc)], note="away")
        if active == "redirect":
            host = self.headers.get("Host") or "%s:%d" % self.server.server_address[:2]
            loc = "http://%s/%s" % (host, urllib.parse.quote(rel))
            if url.query:
                loc += "?" + url.query
            return self.simple(302, "found", [("Location", loc)], note="redirect")

        with open(fname, "rb") as f:
            fs = os.fstat(f.fileno())
            size = fs.st_size
            tag = etag_of(fs)
            lastmod = email.utils.formatdate(fs.st_mtime, usegmt=True)
            validators = [("ETag", tag), ("Last-Modified", lastmod)]
            if active == "announce":
                return self.send_flood(200, f, count, validators, "announce")

            im = self.headers.get("If-Match")
            if im is not None:
                tags = etag_list(im)
                if "*" not in tags and tag not in tags:
                    return self.simple(412, "precondition failed", validators, note="if-match")

            rng = None if active == "norange" else parse_range(self.headers.get("Range"), size)
            ir = self.headers.get("If-Range")
            if rng is not None and ir is not None:
                ir = ir.strip()
                if ir.startswith('"') or ir.startswith("W/"):
                    ok = ir == tag          # strong comparison; a weak tag never matches
                else:
                    ok = ir == lastmod
                if not ok:
                    rng = None

            if rng == "unsatisfiable":
                return self.simple(416, "range not satisfiable",
                                   [("Content-Range", "bytes */%d" % size)] + validators,
                                   note="416")

            first, last = (0, size - 1) if rng is None else rng
            status = 200 if rng is None else 206
            if active == "wrongrange":
                # one byte off what was asked, same length; a request without
                # Range gets a 206 it did not ask for
                if last + 1 < size:
                    first, last = first + 1, last + 1
                elif first > 0:
                    first, last = first - 1, last - 1
                else:
                    first, last = 1, last
                status = 206
            length = max(0, last - first + 1)

            body_fault = None
            if active in BODY_FAULTS and self.command == "GET" and length >= 2:
                if st.bump(self.path) <= count:
                    body_fault = active

            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
            self.send_header("Accept-Ranges", "none" if active == "norange" else "bytes")
            for k, v in validators:
                self.send_header(k, v)
            self.end_headers()
            if self.command == "HEAD":
                return self.note(status, 0, "" if active in BODY_FAULTS else (active or ""))

            if body_fault in ("drop", "stall"):
                sent = self.send_bytes(f, first, length // 2 if body_fault == "drop" else max(1, length // 4))
                self.note(status, sent, body_fault)
                deadline = time.monotonic() + (st.stall if body_fault == "stall" else 0)
                while time.monotonic() < deadline and not self.server.stopping:
                    time.sleep(0.1)
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return None

            sent = self.send_bytes(f, first, length, count if active == "trickle" else 0)
            note = "" if active in BODY_FAULTS else (active or "")
            if fname.endswith(".next") and fault == "change":
                note = "changed"
            self.note(status, sent, note)
            if sent < length:
                self.close_connection = True
            return None


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64
    stopping = False

    def handle_error(self, request, client_address):
        # connections dropped or reset on purpose, or by the client: not news
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description="HTTP/1.1 origin with faults, for dcr's tests")
    ap.add_argument("--root", default=".", help="directory to serve (default .)")
    ap.add_argument("--port", type=int, default=0, help="port; 0 picks a free one (default)")
    ap.add_argument("--bind", default="127.0.0.1", help="address (default 127.0.0.1)")
    ap.add_argument("--log", help="append one line per request to this file")
    ap.add_argument("--stall-seconds", type=float, default=30.0,
                    help="how long a stall fault sleeps (default 30)")
    a = ap.parse_args()
    if not os.path.isdir(a.root):
        ap.error("--root %s: not a directory" % a.root)
    srv = Server((a.bind, a.port), Handler)
    srv.state = State(a.root, a.log, a.stall_seconds)
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stopping = True
        srv.server_close()


if __name__ == "__main__":
    sys.exit(main())
