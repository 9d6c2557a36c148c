#!/usr/bin/env python3
"""link.py PORT UPSTREAM_PORT BYTES_PER_S - one link of limited speed for
bench/fleet.sh: a TCP relay on 127.0.0.1:PORT to 127.0.0.1:UPSTREAM_PORT whose
downstream bytes, all connections together, leave at BYTES_PER_S, paced evenly
(16 KiB at a time).

nginx's limit_rate limits each request alone and lets each send its first
second's worth at once, so a reader with several requests in flight would get
several times the rate: it models an origin's per-request cap, not a link. The
overlap figure needs a link that every request shares, as a NIC or a WAN path
is shared. Runs until killed.
"""
import asyncio
import sys
import time

PIECE = 16384


CATCH_UP = 0.05  # seconds of late sends the link makes up for


class Link:
    def __init__(self, rate):
        self.rate = rate
        self.free_at = time.monotonic()  # when the link has sent what it was given

    async def send(self, n):
        """Waits until n more bytes have crossed the link (callers take turns:
        the event loop runs one at a time, so no lock is needed). A sleep that
        ends late (a busy CPU) is made up by the sends after it, up to CATCH_UP,
        so that the rate holds on a loaded machine; a link idle for longer
        starts afresh."""
        now = time.monotonic()
        self.free_at = max(self.free_at, now - CATCH_UP) + n / self.rate
        if self.free_at > now:
            await asyncio.sleep(self.free_at - now)


async def pipe(reader, writer, link):
    try:
        while data := await reader.read(PIECE):
            if link:
                await link.send(len(data))
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def main():
    port, upstream, rate = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    link = Link(rate)

    async def serve(client_r, client_w):
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            client_w.close()
            return
        # requests go up unlimited; responses come down through the link
        await asyncio.gather(pipe(client_r, up_w, None), pipe(up_r, client_w, link))

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
