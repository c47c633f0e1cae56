#!/usr/bin/env bash
# The README's Quick start on a machine with nothing installed but Python: a Debian 12 (bookworm)
# root made by debootstrap (--variant=minbase, plus python3 and git: what "a fresh Debian machine
# with Python" that cloned the repository has), the repository cloned into it, and the README's
# commands run in it as a newcomer runs them — `apt-get install python3-venv`, a venv,
# `pip install .`, `vlmocr run samples/`, `vlmocr evaluate`, then `bash scripts/test.sh`, which
# must install everything else itself (scripts/system-packages.txt).
#
#   sudo bash scripts/fresh-machine.sh [ROOT [PYTEST ARGS…]]   ROOT default /tmp/vlmocr-fresh
#
# As root on a Debian or Ubuntu host with network access to a Debian mirror and PyPI. The host's
# CA bundle is copied in (a network that intercepts TLS needs it; a plain one does not care);
# nothing else of the host is: no pip cache, no wheels, no packages. The log of each step and the
# time it took are printed; the exit code is the test command's.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
ROOT=${1:-/tmp/vlmocr-fresh}
shift $(( $# > 0 ? 1 : 0 ))  # the rest goes to pytest
MIRROR=${VLMOCR_FRESH_MIRROR:-http://deb.debian.org/debian}

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }

cleanup() {
  for m in dev/pts dev proc sys; do umount -R -l "$ROOT/$m" 2>/dev/null || umount -l "$ROOT/$m" 2>/dev/null || true; done
}
trap cleanup EXIT

stamp() { date +%s; }
t0=$(stamp)
if [[ ! -e "$ROOT/.vlmocr-fresh-base" ]]; then
  rm -rf "$ROOT"
  debootstrap --variant=minbase --include=python3,git,ca-certificates bookworm "$ROOT" "$MIRROR"
  touch "$ROOT/.vlmocr-fresh-base"
fi
echo "fresh-machine: base system in $(( $(stamp) - t0 )) s" >&2

# What makes a chroot a machine: /proc, /sys with its cgroup filesystem (slurmd will not start
# without /sys/fs/cgroup, which systemd mounts on every real machine), /dev, name resolution, and
# the CA bundle.
mount -t proc proc "$ROOT/proc"
mount --rbind /sys "$ROOT/sys" && mount --make-rslave "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount --bind /dev/pts "$ROOT/dev/pts"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/host-ca-bundle.crt"
cp /etc/apt/sources.list.d/debian.sources "$ROOT/etc/apt/sources.list.d/" 2>/dev/null || true

rm -rf "$ROOT/root/vlmocr"
git clone -q "$REPO" "$ROOT/root/vlmocr"
# The working tree as it stands (a clone has the last commit; CI tests the working tree).
git -C "$REPO" ls-files -z | tar --null -C "$REPO" -T - -cf - | tar -xf - -C "$ROOT/root/vlmocr"

cat >"$ROOT/root/quickstart.sh" <<'EOF'
set -euo pipefail
export HOME=/root PIP_CERT=/etc/ssl/certs/host-ca-bundle.crt PIP_DISABLE_PIP_VERSION_CHECK=1
cd /root/vlmocr
python3 --version
t=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
python3 -m venv /root/venv && . /root/venv/bin/activate
pip install -q . && vlmocr run samples/ --out runs/first
vlmocr evaluate runs/first --truth samples/
echo "fresh-machine: Quick start in $(( $(date +%s) - t )) s" >&2
t=$(date +%s)
status=0
bash scripts/test.sh -q -p no:cacheprovider "$@" || status=$?
echo "fresh-machine: scripts/test.sh exit $status in $(( $(date +%s) - t )) s" >&2
exit $status
EOF
chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
  bash /root/quickstart.sh "$@"
