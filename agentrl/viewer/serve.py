"""`agentrl view --serve`: serve the built viewer over HTTP on localhost (the page also opens from disk)."""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # one line per request is noise here
        pass


def make_server(page: Path, port: int = 8000, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """An HTTP server for the folder of `page` (port 0 picks a free port); call `serve_forever()` on it."""
    handler = functools.partial(_QuietHandler, directory=str(Path(page).resolve().parent))
    return ThreadingHTTPServer((host, port), handler)


def serve(page: Path, port: int = 8000) -> None:
    """Serve `page` on http://127.0.0.1:PORT/ until Ctrl-C."""
    server = make_server(page, port)
    url = f"http://127.0.0.1:{server.server_address[1]}/{Path(page).name}"
    print(f"serving {page} at {url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
