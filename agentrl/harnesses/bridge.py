"""Run inside a sandbox that has no network: forward a TCP port on its loopback to the gateway's unix socket (the
only thing mounted into it that leads out), then run the agent's command; exit with the command's code.

    python3 bridge.py PORT SOCKET COMMAND [ARG ...]

Standard library only (it runs under the task image's own Python, 3.8 or later). Uploaded into each sandbox by
`agentrl.harnesses.run`; never imported by agentrl itself.
"""

import asyncio
import sys


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main(port, socket_path, argv):
    async def forward(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(forward, "127.0.0.1", port)
    process = await asyncio.create_subprocess_exec(*argv)
    code = await process.wait()
    server.close()
    return code


if __name__ == "__main__":
    sys.exit(asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3:])))
