#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   scripts/dev.sh demo   install what is missing, build, inspect and run a bundled model
#   scripts/dev.sh test   install what is missing, build, run the whole test suite
#   scripts/dev.sh build  install what is missing and build
#   scripts/dev.sh sanitize  the same as test, in a Debug build with AddressSanitizer
#                         and UBSan (build-asan/); any report fails its test
# Environment: BUILD_DIR (default build, build-asan for sanitize), JOBS (default:
# number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-$(nproc)}

# Debian packages only. python3-torch (with python3-numpy) makes test data and
# checks our answers against PyTorch: without it the pytorch.* tests would skip,
# so a fresh machine installs it. graphviz lets the tests check
# `inspect --graph --format dot` with dot. python3 runs the test drivers; time
# (/usr/bin/time) measures the memory of commands in cli.hostile_all. g++
# brings GCC's ASan and UBSan runtimes. ccache, when there, caches compiles
# across the build folders (build/, build-asan/, ...).
PACKAGES=(cmake ninja-build g++ pkg-config libtorch-dev libzip-dev zlib1g-dev libcli11-dev nlohmann-json3-dev catch2
          libssl-dev graphviz python3 python3-torch python3-numpy time ccache)
. scripts/debian.sh

# build BUILD_TYPE [CMAKE_ARGS...]
build() {
  install_packages "${PACKAGES[@]}"
  local type=$1
  shift
  local launcher=()
  if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$type" "${launcher[@]}" "$@"
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

case ${1:-} in
  sanitize) BUILD_DIR=${BUILD_DIR:-build-asan} ;;
  *) BUILD_DIR=${BUILD_DIR:-build} ;;
esac

case ${1:-} in
  demo)
    build RelWithDebInfo
    "$BUILD_DIR/tsarchive" --version
    "$BUILD_DIR/tsarchive" inspect testdata/mlp_scripted.pt
    # Seeded like Python's torch.randn, so the output equals the one Python saved.
    "$BUILD_DIR/tsarchive" run testdata/mlp_scripted.pt --input 2x8 --expect @testdata/run/mlp_out_seed0.pt
    ;;
  test)
    build RelWithDebInfo
    ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure
    ;;
  sanitize)
    # Our code is built with -fno-sanitize-recover=undefined, so a UBSan report
    # aborts like an ASan one; the options say the same for any other code and
    # print the stack. LeakSanitizer is on (the default on x86-64).
    build Debug -DTSARCHIVE_SANITIZE=ON
    export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
    echo "==> the whole suite under AddressSanitizer + UBSan ($BUILD_DIR; ASAN_OPTIONS=$ASAN_OPTIONS)"
    ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure
    ;;
  build)
    build RelWithDebInfo
    ;;
  *)
    echo "usage: scripts/dev.sh demo|test|build|sanitize" >&2
    exit 2
    ;;
esac
