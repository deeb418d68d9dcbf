"""Built-in sandboxed tools: `bash`, `python` (in `shell`), `editor`, `submit`; registered lazily in `TOOLS`.

They run in the trajectory's sandbox (`ctx.sandbox`) and answer with a clear error when none is configured.
"""
