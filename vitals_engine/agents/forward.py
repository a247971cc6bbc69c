"""Inside a sandbox without a network, where the image has python3 but no node:
127.0.0.1:PORT forwarded to the bridge's unix socket (argv: socket, port, a file created
once it listens), as forward.js does. Standard library only, Python 3.7 or later.

Example (what `coding.py` runs in the sandbox):
    python3 /tmp/.vitals-forward.py /vitals-shared/vitals-bridges-x/ab12.sock 43117 /tmp/.ready
"""

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy `reader` to `writer` until it ends, then end `writer`'s side."""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


async def _forward(
    socket: str, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
) -> None:
    """One client's connection, joined to a new connection to the bridge."""
    try:
        bridge_r, bridge_w = await asyncio.open_unix_connection(socket)
    except OSError:
        client_w.close()
        return
    try:
        await asyncio.gather(_pipe(client_r, bridge_w), _pipe(bridge_r, client_w))
    finally:
        bridge_w.close()
        client_w.close()


def _touch(path: str) -> None:
    with open(path, "w"):
        pass


async def main(socket: str, port: int, ready: str) -> None:
    """Listen on 127.0.0.1:`port`, create `ready`, and forward each connection for ever."""
    server = await asyncio.start_server(
        lambda reader, writer: _forward(socket, reader, writer), "127.0.0.1", port
    )
    _touch(ready)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
