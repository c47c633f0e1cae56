#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine (as root), start the
# single-node SLURM cluster, and run the tests. README's second Quick start command; CI runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

# The language packs the tests read with (engines/languages.py names each one's package): Fraktur as
# language (frk) and as script model (script-frak), polytonic Greek, Czech, Danish, Slovak; osd for script
# detection.
apt_pkgs=(tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu tesseract-ocr-fra tesseract-ocr-frk tesseract-ocr-grc
          tesseract-ocr-ces tesseract-ocr-dan tesseract-ocr-slk tesseract-ocr-script-frak tesseract-ocr-osd)
missing=()
for p in "${apt_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

bash scripts/install-browser.sh

python -m pip install -q -e '.[test]'

if [[ -x scripts/slurm-up.sh ]]; then
  bash scripts/slurm-up.sh
fi

# Strict: a missing component (tesseract, SLURM, Chromium, ground truth) fails instead of skipping.
export VLMOCR_TEST_STRICT=1
exec python -m pytest "$@"
