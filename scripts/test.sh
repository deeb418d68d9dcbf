#!/usr/bin/env bash
# `make test`: every test, on a machine prepared first (idempotently, as `make setup` does, plus the vLLM venv and
# the docs build). The unit tests need only the Python environment, so they run while the rest is prepared beside
# them (Docker engine, sandbox images, model, browser, vLLM venv, docs): on a fresh machine, as in CI, that overlap
# saves the unit suite's minutes. What the preparation printed is shown when it ends; the integration tests start
# then. Both suites run whatever the other's result; the exit status is the first failure's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=.venv/bin/python
export HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True

bash scripts/setup.sh --venv-only

prepare_log="$(mktemp -t agentrl-prepare.XXXXXX)"
{ bash scripts/setup.sh && bash scripts/install_vllm.sh && make --no-print-directory docs; } >"$prepare_log" 2>&1 &
prepare=$!
printf '\033[1m==> unit tests (Docker, images, model, vLLM and docs are prepared beside them: %s)\033[0m\n' "$prepare_log"
unit=0
"$PY" -m pytest tests/unit -q || unit=$?

prepared=0
wait "$prepare" || prepared=$?
cat "$prepare_log"
if [ "$prepared" -ne 0 ]; then
  echo "error: preparing the integration tests failed (exit $prepared): see the output above" >&2
  exit "$prepared"
fi

printf '\033[1m==> integration tests (real model, servers, Docker, Ray)\033[0m\n'
integration=0
"$PY" -m pytest tests/integration -q --durations=45 || integration=$?
[ "$unit" -ne 0 ] && exit "$unit"
exit "$integration"
