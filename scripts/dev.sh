#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   scripts/dev.sh demo   install what is missing, build, inspect and run a bundled model
#   scripts/dev.sh test   install what is missing, build, run the whole test suite
#   scripts/dev.sh build  install what is missing and build
# Environment: BUILD_DIR (default build), JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

# Debian packages only. python3-torch makes test data and checks our answers
# against PyTorch; graphviz lets the tests check `inspect --graph --format dot`
# with dot; the suite does not need either to pass.
PACKAGES=(cmake ninja-build g++ pkg-config libtorch-dev libzip-dev zlib1g-dev libcli11-dev nlohmann-json3-dev catch2 libssl-dev graphviz)

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "==> installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {
  install_packages
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

case ${1:-} in
  demo)
    build
    "$BUILD_DIR/tsarchive" --version
    "$BUILD_DIR/tsarchive" inspect testdata/mlp_scripted.pt
    # Seeded like Python's torch.randn, so the output equals the one Python saved.
    "$BUILD_DIR/tsarchive" run testdata/mlp_scripted.pt --input 2x8 --expect @testdata/run/mlp_out_seed0.pt
    ;;
  test)
    build
    ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure
    ;;
  build)
    build
    ;;
  *)
    echo "usage: scripts/dev.sh demo|test|build" >&2
    exit 2
    ;;
esac
