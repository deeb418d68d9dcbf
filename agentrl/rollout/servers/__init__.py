"""Rollout server backends.

`hf` is the built-in server (transformers on CPU or GPU, continuous batching). The vLLM and SGLang backends
live next to it. Importing this package is cheap: heavy dependencies (torch, transformers) load on use.
"""
