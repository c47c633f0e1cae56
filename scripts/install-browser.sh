#!/usr/bin/env bash
# Install Debian's Chromium for the HTML report's browser tests (tests/report/). Idempotent:
# does nothing when /usr/bin/chromium is already there. Needs root (CI and the dev machines run
# as root). No browser is downloaded from anywhere but the Debian archive.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && [[ -x /usr/bin/chromium ]]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Both are in scripts/system-packages.txt, which scripts/test.sh installs from.
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
chromium --version
