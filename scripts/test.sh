#!/usr/bin/env bash
# `make test`: every test, on a machine prepared first (idempotently, as `make setup` does, plus the vLLM venv and
# the docs build). vLLM's venv needs nothing of ours, so it is installed from the start, beside our venv. The unit
# tests need only our venv, so they run while the rest is prepared beside them (Docker engine, sandbox images,
# model, browser, docs): on a fresh machine, as in CI, that overlap saves the unit suite's minutes. What the
# preparation printed is shown when it ends; the integration tests start then. Both suites run whatever the other's
# result (but Ctrl-C stops everything); the exit status is the unit suite's if it failed, else the preparation's or
# the integration suite's (its first lane's, else its second's).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=.venv/bin/python
export HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True

# setup's root steps run in the background, where sudo could not ask for a password
[ "$(id -u)" -eq 0 ] || sudo -v
# vLLM's venv needs nothing of ours: it is installed from the start, beside our venv (each a session of its own, so
# that Ctrl-C here can stop all of it; the Docker engine setup starts has its own)
vllm_log="$(mktemp -t agentrl-vllm.XXXXXX)"
setsid bash scripts/install_vllm.sh >"$vllm_log" 2>&1 &
vllm=$!
prepare=""
stop_preparing() {
  kill -- -"$vllm" 2>/dev/null || true
  [ -n "$prepare" ] && { kill -- -"$prepare" 2>/dev/null || true; }
  echo "stopped; what the preparation printed: $vllm_log ${prepare_log-}" >&2
}
trap 'stop_preparing; exit 130' INT TERM

bash scripts/setup.sh --venv-only
prepare_log="$(mktemp -t agentrl-prepare.XXXXXX)"
setsid bash -c 'bash scripts/setup.sh --tests && make --no-print-directory docs' >"$prepare_log" 2>&1 &
prepare=$!
printf '\033[1m==> unit tests (Docker, images, model, vLLM and docs are prepared beside them: %s)\033[0m\n' "$prepare_log"
unit=0
"$PY" -m pytest tests/unit -q || unit=$?
if [ "$unit" -eq 2 ]; then # pytest's "interrupted" (Ctrl-C): stop here too
  stop_preparing
  exit 2
fi

prepared=0
wait "$prepare" || prepared=$?
wait "$vllm" || prepared=$?
trap - INT TERM
cat "$prepare_log" "$vllm_log" && rm -f "$prepare_log" "$vllm_log"
if [ "$prepared" -ne 0 ]; then
  echo "error: preparing the integration tests failed (exit $prepared): see the output above" >&2
  [ "$unit" -ne 0 ] && exit "$unit"
  exit "$prepared"
fi

# Two lanes (tests/integration/lanes.py): the second, training runs that need no Docker, Ray, vLLM or timing, runs
# beside the first at the lowest priority, on the CPU the first leaves idle; what it printed follows the first's.
second_log="$(mktemp -t agentrl-second-lane.XXXXXX)"
AGENTRL_TEST_LANE=second setsid nice -n 19 "$PY" -m pytest tests/integration -q --durations=20 >"$second_log" 2>&1 &
second=$!
trap 'kill -INT -- -"$second" 2>/dev/null; echo "stopped; what the second lane printed: $second_log" >&2; exit 130' INT TERM
printf '\033[1m==> integration tests (real model, servers, Docker, Ray; a second lane beside them: %s)\033[0m\n' \
  "$second_log"
integration=0
AGENTRL_TEST_LANE=first "$PY" -m pytest tests/integration -q --durations=45 || integration=$?
lane=0
wait "$second" || lane=$?
trap - INT TERM
printf '\033[1m==> integration tests, second lane\033[0m\n'
cat "$second_log" && rm -f "$second_log"
[ "$unit" -ne 0 ] && exit "$unit"
[ "$integration" -ne 0 ] && exit "$integration"
exit "$lane"
