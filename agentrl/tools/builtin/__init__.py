"""Built-in tools, registered lazily in `TOOLS`: the sandboxed `bash`, `python` (in `shell`) and `editor`, and
`submit` and `calculator`, which need no sandbox.

Sandboxed tools run in the trajectory's sandbox (`ctx.sandbox`) and answer with a clear error when none is configured.
"""
