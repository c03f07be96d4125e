#!/usr/bin/env bash
# Builds the serving image (deploy/Containerfile) from BUILD's .deb, its
# in-build smoke test included, with no daemon and no image registry:
#   1. `cpack -G DEB` in BUILD, and a build context in BUILD/image-context: the
#      .deb, the entrypoint, and check/ (testdata/mlp_scripted.pt, the request
#      and PyTorch's answer, and a stamped copy signed with a key made here, plus
#      that copy changed after signing; the private key stays outside)
#   2. a Debian 12 root made with debootstrap (minbase), cached as a tarball in
#      TSARCHIVE_IMAGE_CACHE (default .cache/deploy/, git-ignored; minutes the
#      first time; delete the tarball to refresh it) and imported with `podman import`
#   3. `podman build --isolation chroot --storage-driver vfs` with that root as BASE:
#      its check stage serves the model and queries it (deploy/check/smoke.sh)
# Then it prints the image's size and each step's time.
# ENGINE=docker: step 2 is skipped and `docker build` uses debian:12 from a registry.
# Usage: deploy/build-image.sh [BUILD_DIR]   (default: build)
# Environment: IMAGE (default localhost/tsarchive:VERSION), MIRROR (default
# http://deb.debian.org/debian), ENGINE (podman or docker), TSARCHIVE_IMAGE_CACHE.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
engine=${ENGINE:-podman}
mirror=${MIRROR:-http://deb.debian.org/debian}
cache=${TSARCHIVE_IMAGE_CACHE:-.cache/deploy}
base_tar=$cache/debian-12-minbase.tar
base_image=localhost/tsarchive-base:debian12
fail() { echo "FAIL: $*" >&2; exit 1; }

. scripts/debian.sh
case $engine in
  podman) install_packages debootstrap podman dpkg-dev openssl ;;
  docker) install_packages dpkg-dev openssl ;;
  *) fail "ENGINE=$engine: podman or docker" ;;
esac
[ -x "$build/tsarchive" ] || fail "no $build/tsarchive: build first (scripts/dev.sh build)"
version=$("$build/tsarchive" --version | awk '{print $2; exit}')
image=${IMAGE:-localhost/tsarchive:$version}

# The check's signed archive: stamped, then signed with a key made for this
# build only; `tampered` is the same archive with an extra file set after signing.
sign_check_models() {
  local check=$1 keys
  keys=$(mktemp -d)
  openssl ecparam -name prime256v1 -genkey -noout -out "$keys/key.pem" 2>/dev/null
  openssl ec -in "$keys/key.pem" -pubout -out "$check/key.pub" 2>/dev/null
  mkdir "$check/signed" "$check/tampered"
  cp testdata/mlp_scripted.pt "$check/signed/mlp.pt"
  "$build/tsarchive" stamp -q --keep-bytes "$check/signed/mlp.pt"
  "$build/tsarchive" sign -q --key "$keys/key.pem" "$check/signed/mlp.pt"
  rm -r "$keys"
  cp "$check/signed/"* "$check/tampered/"
  "$build/tsarchive" extra set -q "$check/tampered/mlp.pt" note=changed-after-signing
}

context() {
  rm -f "$build"/tsarchive_*.deb
  (cd "$build" && cpack -G DEB >/dev/null)
  ctx=$build/image-context
  rm -rf "$ctx"
  mkdir -p "$ctx/check"
  cp "$build"/tsarchive_*.deb "$ctx/tsarchive.deb"
  cp deploy/tsarchive-entrypoint "$ctx/"
  cp deploy/check/smoke.sh deploy/check/infer_request.json deploy/check/infer_golden.json \
     testdata/mlp_scripted.pt "$ctx/check/"
  sign_check_models "$ctx/check"
}

podman_vfs() { podman --storage-driver vfs "$@"; }

# The mode of the tarball's first entry, "./": the image's "/".
base_root_mode() { tar -tvf "$base_tar" 2>/dev/null | head -1 | cut -c1-10; }

base() {
  # A root made before mktemp's 0700 was corrected: as uid 1000 nothing in the
  # image could run (the check stage failed with "fork/exec /bin/sh: permission denied").
  if [ -s "$base_tar" ] && [ "$(base_root_mode)" != drwxr-xr-x ]; then
    echo "==> $base_tar: its / is $(base_root_mode), not drwxr-xr-x; making it again"
    rm -f "$base_tar"
  fi
  if [ ! -s "$base_tar" ]; then
    mkdir -p "$cache"
    local root
    root=$(mktemp -d)
    chmod 755 "$root"  # mktemp's 0700 would become the image's "/"
    echo "==> debootstrap bookworm from $mirror (cached in $base_tar)"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" ||
      { tail -20 "$cache/debootstrap.log" >&2; rm -rf "$root"; fail "debootstrap failed (log: $cache/debootstrap.log)"; }
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
    tar -C "$root" --numeric-owner -cf "$base_tar.tmp" .
    rm -rf "$root"
    mv "$base_tar.tmp" "$base_tar"
  fi
  podman_vfs import -q "$base_tar" "$base_image" >/dev/null
}

image_build() {
  if [ "$engine" = docker ]; then
    docker build -t "$image" -f deploy/Containerfile "$ctx"
  else
    podman_vfs build --isolation chroot --layers=false --build-arg BASE="$base_image" -t "$image" -f deploy/Containerfile "$ctx"
  fi
}

timed "package and context" context
[ "$engine" = docker ] || timed "debootstrap + import" base
timed "image build + check" image_build

if [ "$engine" = docker ]; then
  size=$(docker image inspect --format '{{.Size}}' "$image")
else
  size=$(podman_vfs image inspect --format '{{.Size}}' "$image")
  podman_vfs image prune -f >/dev/null  # the image this tag named before, now unnamed
fi
echo "==> $image: $((size / 1000000)) MB uncompressed"
printf 'image build step times:\n'
printf '  %s\n' "${step_times[@]}"
