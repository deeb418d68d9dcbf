"""Built-in tools, registered lazily in `TOOLS`: the sandboxed `bash`, `python` (in `shell`) and `editor`, the
one-line edits (`edit_line`, `replace_line`), the small-model exploration tools (`view_lines`, `search_code`,
`run_tests`), and `submit` and `calculator`, which need no sandbox.

Sandboxed tools run in the trajectory's sandbox (`ctx.sandbox`) and answer with a clear error when none is configured.
"""
