"""agentrl.sandbox: where tool code runs, isolated per trajectory.

Modules: `base` (the `Sandbox` contract: exec, write_file, read_file, close; `SandboxError`), `docker` (the
Docker sandbox: no network, memory/CPU/pid/time limits), `local` (a temporary folder on this machine, for tests
and trusted tools), `pool` (warm containers, leases, none leaked), `containers` (labels, orphan sweep, removal at
exit), `images` (the offline sandbox base image, built with debootstrap), `recipe_images` (a recipe's own image
layered on it).
"""
