#!/usr/bin/env bash
# Idempotent setup: venv, Docker engine, sandbox base image, default model.
# Every step is skipped quickly when already done; a second run takes a few seconds.
# Usage: scripts/setup.sh [--venv-only | --quickstart | --tests]
#   --venv-only   the Python environment (enough for the unit tests)
#   --quickstart  the Python environment and the default model: what `make quickstart` uses, nothing else
#   --tests       everything but the bundled SWE tasks' images: a run (and a test) builds the ones it opens
#   (none)        everything, the bundled SWE tasks' images included
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO_ROOT="$(pwd)"
VENV="$REPO_ROOT/.venv"
STAMP="$VENV/.agentrl-install-stamp"
DOCKERD_LOG=/var/log/agentrl-dockerd.log
export HF_HUB_OFFLINE=1
export LITELLM_LOCAL_MODEL_COST_MAP=True
export DEBIAN_FRONTEND=noninteractive

step() { printf '\033[1m==> %s\033[0m\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() { printf '\033[31merror:\033[0m %s\n' "$*" >&2; exit 1; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
as_root() { $SUDO "$@"; }

# --- a. Python environment ------------------------------------------------------------------------
setup_venv() {
  local extras="${1-dev}" # the quickstart needs agentrl alone; the tests and the other recipes its dev extras
  step "Python environment (.venv)"
  if [ ! -x "$VENV/bin/python" ]; then
    command -v python3.11 >/dev/null || die "python3.11 not found: install Python 3.11 and retry"
    info "creating .venv with $(command -v python3.11)"
    python3.11 -m venv "$VENV"
  fi
  local want have=""
  want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
  [ -f "$STAMP" ] && have="$(cat "$STAMP")"
  if [ "$have" = "$want dev" ] || [ "$have" = "$want $extras" ]; then
    info "up to date (pyproject.toml unchanged since last install)"
    return
  fi
  local spec="."
  [ -n "$extras" ] && spec=".[$extras]"
  install_with_uv "$spec" || install_with_pip "$spec"
  echo "$want $extras" >"$STAMP"
  info "installed"
}

# uv resolves as pip does (the same versions here) and installs 300 packages in parallel: 7 min with pip became
# about 1.5. It does not read pip's configuration, so pip's find-links (where the CPU torch wheel lies) are passed.
# Byte-compiled at install (85 s faster than not): where PYTHONDONTWRITEBYTECODE is set, as on these machines,
# nothing compiled later is kept, and every process would compile torch's modules again (CI +5 min).
install_with_uv() {
  local spec="$1" links link args=()
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv>=0.9" 2>&1 |
    { grep -v "^WARNING: Location '.*' is ignored" || true; }
  [ -x "$VENV/bin/uv" ] || return 1
  links="${PIP_FIND_LINKS:-$("$VENV/bin/python" -m pip config get global.find-links 2>/dev/null || true)}"
  for link in $links; do args+=(--find-links "$link"); done
  info "uv pip install -e '$spec' (torch comes from the local wheel via pip's find-links: ${links:-none})"
  "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --compile-bytecode "${args[@]}" -e "$spec" && return 0
  info "uv could not install it: pip does instead"
  return 1
}

install_with_pip() {
  info "pip install -e '$1' (torch comes from the local wheel via the pip config's find-links)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$1" 2>&1 |
    { grep -v "^WARNING: Location '.*' is ignored" || true; } # the machine's pip config names index folders it lacks
}

# --- b. Docker engine -----------------------------------------------------------------------------
docker_answers() { timeout 10 docker info >/dev/null 2>&1; }

install_docker() {
  command -v dockerd >/dev/null && command -v debootstrap >/dev/null && return
  info "installing docker.io and debootstrap with apt-get"
  as_root apt-get install -y -q docker.io debootstrap >/dev/null ||
    { as_root apt-get update -q >/dev/null && as_root apt-get install -y -q docker.io debootstrap >/dev/null; } ||
    die "apt-get install docker.io debootstrap failed"
}

# Start dockerd with the given flags; return 0 once `docker info` works, 1 if it dies or times out.
try_dockerd() {
  local wait_s="$1"
  shift
  local pidfile=/var/run/docker.pid
  if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    as_root rm -f "$pidfile"  # stale pid file from an earlier run blocks a new daemon
  fi
  info "starting dockerd $* (log: $DOCKERD_LOG)"
  echo "=== $(date -Is) dockerd $*" | as_root tee -a "$DOCKERD_LOG" >/dev/null
  # setsid: its own session, so a later Ctrl-C in this terminal does not reach the daemon.
  $SUDO setsid sh -c 'exec nohup dockerd "$@" >>'"$DOCKERD_LOG"' 2>&1 </dev/null' dockerd "$@" &
  local pid=$! i
  for ((i = 0; i < wait_s; i++)); do
    docker_answers && return 0
    kill -0 "$pid" 2>/dev/null || { info "dockerd exited; see $DOCKERD_LOG"; return 1; }
    sleep 1
  done
  info "dockerd did not answer within ${wait_s}s; stopping it"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return 1
}

setup_docker() {
  step "Docker engine"
  if docker_answers; then
    info "engine answers ($(docker info --format '{{.ServerVersion}}, storage {{.Driver}}' 2>/dev/null))"
    return
  fi
  install_docker
  # Default flags work on the dev machine (overlay2 on ext4, nf_tables iptables). Fallbacks, in order:
  # no iptables/bridge (sandboxes use network_mode=none anyway), then also the slow but universal vfs driver.
  try_dockerd 30 ||
    try_dockerd 15 --iptables=false --bridge=none ||
    try_dockerd 15 --iptables=false --bridge=none --storage-driver=vfs ||
    die "could not start dockerd: see $DOCKERD_LOG"
  info "engine answers ($(docker info --format '{{.ServerVersion}}, storage {{.Driver}}' 2>/dev/null))"
}

# --- c. Sandbox base image ------------------------------------------------------------------------
setup_image() {
  step "Sandbox base image"
  "$VENV/bin/python" -m agentrl.sandbox.images
}

# --- d. Default model -----------------------------------------------------------------------------
setup_model() {
  step "Default model"
  if [ -f agentrl/models.py ]; then
    "$VENV/bin/python" -m agentrl.models prepare
  else
    info "agentrl/models.py not there yet: skipped"
  fi
}

# --- e. Headless browser (trajectory viewer tests, GUI env) ---------------------------------------
setup_browser() {
  step "Headless browser (chromium + chromium-driver)"
  if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    info "installed ($(chromium --version 2>/dev/null | head -n1))"
    return
  fi
  info "installing chromium and chromium-driver with apt-get"
  as_root apt-get install -y -q chromium chromium-driver >/dev/null ||
    { as_root apt-get update -q >/dev/null && as_root apt-get install -y -q chromium chromium-driver >/dev/null; } ||
    die "apt-get install chromium chromium-driver failed"
}

# --- a2. Harbor's own package, for reading Harbor tasks (data.harbor_reader) --------------------------
# harbor needs Python 3.12+ and agentrl runs on 3.11, so it gets an environment of its own; agentrl runs it as a
# subprocess (agentrl/harbor/package.py). The stamp is written last: a half-made environment is never used.
HARBOR_VENV="$REPO_ROOT/.venv-harbor"
HARBOR_SPEC="harbor==0.26.0"
python312() {
  local cand root
  for cand in python3.12 python3.13; do
    "$cand" -c "" >/dev/null 2>&1 && { command -v "$cand"; return; }
  done
  root="$(pyenv root 2>/dev/null || true)"
  for cand in "$root"/versions/3.12*/bin/python3.12 "$root"/versions/3.13*/bin/python3.13; do
    [ -x "$cand" ] && { echo "$cand"; return; }
  done
  return 0
}
setup_harbor() {
  step "Harbor's package (.venv-harbor)"
  if [ "$(cat "$HARBOR_VENV/.agentrl-ready" 2>/dev/null)" = "$HARBOR_SPEC" ]; then
    info "up to date ($HARBOR_SPEC)"
    return
  fi
  local py
  py="$(python312)"
  if [ -z "$py" ]; then
    info "skipped: no Python 3.12+ here; agentrl's own reader reads Harbor tasks (data.harbor_reader=auto)"
    return
  fi
  info "creating .venv-harbor with $py and installing $HARBOR_SPEC"
  rm -rf "$HARBOR_VENV"
  "$py" -m venv "$HARBOR_VENV"
  "$HARBOR_VENV/bin/pip" install -q "$HARBOR_SPEC" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
  if ! "$HARBOR_VENV/bin/python" -c "import harbor.models.task.task" 2>/dev/null; then
    info "installing $HARBOR_SPEC failed: agentrl's own reader reads Harbor tasks (run make setup again to retry)"
    return
  fi
  echo "$HARBOR_SPEC" >"$HARBOR_VENV/.agentrl-ready"
}

# --- f. Agent harnesses (Claude Code, Codex CLI): npm registry packages, served to containers from a volume ------
setup_harnesses() {
  step "Agent harnesses (Claude Code, Codex CLI)"
  if ! command -v npm >/dev/null; then
    info "installing npm with apt-get (it fetches the harnesses' packages)"
    as_root apt-get install -y -q npm >/dev/null ||
      { as_root apt-get update -q >/dev/null && as_root apt-get install -y -q npm >/dev/null; } ||
      die "apt-get install npm failed"
  fi
  "$VENV/bin/python" -m agentrl.harnesses.install
}

# --- a3. verifiers 0.4's own interpreter (agent.name=verifiers_v1): it pins an older openai than agentrl's ----------
setup_verifiers_v1() {
  step "verifiers 0.4 (.venv-verifiers)"
  "$VENV/bin/python" -m agentrl.verifiers_v1.install
}

MODE="${1:-}"
case "$MODE" in
  "" | --venv-only | --quickstart | --tests) ;;
  *) die "unknown option $MODE: use --venv-only, --quickstart, --tests or nothing (everything)" ;;
esac
if [ "$MODE" = "--quickstart" ]; then
  setup_venv ""
else
  setup_venv dev
fi
if [ "$MODE" = "--venv-only" ]; then
  exit 0
fi
if [ "$MODE" = "--quickstart" ]; then
  setup_model
  step "Setup done (the quickstart's: each other recipe prepares what it needs when it first runs)"
  exit 0
fi
setup_docker
setup_image
if [ "$MODE" != "--tests" ]; then
  step "SWE task images" && "$VENV/bin/python" -m agentrl.swe.images recipes/swe_agent/data/*.jsonl recipes/swe_easy/data/*.jsonl
fi
setup_model
setup_harbor
setup_verifiers_v1
setup_browser
setup_harnesses
step "Setup done"
