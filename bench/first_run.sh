#!/usr/bin/env bash
# bench/first_run.sh: README's first command as a new user meets it: a fresh
# Debian 12 root (debootstrap --variant=minbase bookworm, no packages beyond
# it, an empty compiler cache), a fresh clone of this repository's HEAD, and
# `scripts/dev.sh demo` (or MODE=test: `scripts/dev.sh test`) run in it with
# chroot. dev.sh prints each step's time; this prints the whole.
#
# Needs root, debootstrap and Debian's package mirror. The root is made once
# under ROOT and kept: a second run finds its packages installed and its
# compiler cache warm, which is not a first run. FRESH=1 makes it again
# (about a minute) for a true first run.
#
# Environment: ROOT (default /var/tmp/tsarchive-first-run), MODE (demo or
# test, default demo), FRESH (1: remake the root), MIRROR (default
# http://deb.debian.org/debian).
# Exit: dev.sh's status; 2 for a setup error.
set -euo pipefail
REPO=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
ROOT=${ROOT:-/var/tmp/tsarchive-first-run}
MODE=${MODE:-demo}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
die() { echo "bench/first_run.sh: setup error: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run it as root (debootstrap and chroot)"
command -v debootstrap >/dev/null || die "install debootstrap (apt-get install debootstrap)"
case $MODE in demo | test) ;; *) die "MODE is demo or test, not '$MODE'" ;; esac

mounts=(proc sys dev dev/pts)
unmount() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    mountpoint -q "$ROOT/${mounts[i]}" && umount "$ROOT/${mounts[i]}"
  done
  return 0
}
trap unmount EXIT

if [ "${FRESH:-0}" = 1 ] || [ ! -x "$ROOT/usr/bin/apt-get" ]; then
  unmount
  rm -rf "$ROOT"
  start=$SECONDS
  debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >/dev/null || die "debootstrap failed"
  echo "debootstrap (not part of the first run): $((SECONDS - start)) s"
  # The same suites a Debian 12 install has: bookworm, its updates and security.
  cat >"$ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
fi
for m in "${mounts[@]}"; do mountpoint -q "$ROOT/$m" || mount --bind "/$m" "$ROOT/$m"; done
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
rm -rf "$ROOT/src" && mkdir -p "$ROOT/src"
git clone -q "$REPO" "$ROOT/src/tsarchive"
echo "clone: $(git -C "$ROOT/src/tsarchive" log --oneline -1 | cut -c1-80)"
echo "nproc: $(nproc)"
start=$SECONDS
status=0
chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive /bin/bash -c "cd /src/tsarchive && scripts/dev.sh $MODE" || status=$?
echo "scripts/dev.sh $MODE: exit $status, $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s from a fresh clone"
exit $status
