#!/usr/bin/env bash
# The whole suite with the network cut after the install step: what an offline clone (a cluster's
# compute node, a plane) meets once `scripts/test.sh --install-only` has run with the network. The
# tests run in a network namespace of their own holding only loopback (`unshare -n`: root, or a
# kernel allowing unprivileged user namespaces): the private SLURM cluster, the real-server lane's
# vLLM and the stand-ins all live on 127.0.0.1 there; anything a test tried to fetch fails.
#
#   bash scripts/test-offline.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test.sh --install-only
# A private cluster running in this namespace would answer no one in the other: stopped, and
# started again in there by test.sh (and stopped by it at the end).
bash scripts/slurm-down.sh --quiet || true
# A second address on loopback: getaddrinfo's AI_ADDRCONFIG (slurmctld binding its port) counts no
# 127.x address as configured; there is still no route anywhere.
exec unshare -n bash -c 'ip link set lo up && ip addr add 10.254.254.254/32 dev lo \
  && exec bash scripts/test.sh --no-install "$@"' test-offline "$@"
