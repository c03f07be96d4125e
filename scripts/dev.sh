#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine:
#   scripts/dev.sh demo   install what is missing, build, inspect and run a bundled model
#   scripts/dev.sh test   install what is missing, build, run the whole test suite
#   scripts/dev.sh build  install what is missing and build
#   scripts/dev.sh fast   build, then the tests labelled fast (unit, golden, fuzz replay,
#                         layering; under a minute): the inner loop. Same as
#                         `ctest --preset fast` after a build
#   scripts/dev.sh sanitize  the same as test, in a Debug build with AddressSanitizer
#                         and UBSan (build-asan/); any report fails its test
#   scripts/dev.sh torch2 [build|test|demo]
#                         the same against a pip-installed torch 2.x (TORCH_PIP, default
#                         torch==2.13.0) in a project-local venv (.venv/, made on first use)
#                         in build-torch2/; its tests compare with that venv's python. `test`
#                         runs the tests that load libtorch or compare with PyTorch.
#                         TORCH_PYTHON=/path/to/python: that Python's torch as it is
#                         (no venv, no pip), e.g. a CUDA PyTorch already installed.
# Any other libtorch: CMAKE_PREFIX_PATH=/path/to/libtorch BUILD_DIR=build-x scripts/dev.sh build
# (add -DTSARCHIVE_PYTHON=... through CMAKE_ARGS for a Python with the same torch).
# Environment: BUILD_TYPE (default Release: -O2 without debug info, which halves
# the compile time of the libtorch layer; RelWithDebInfo for a debugger; sanitize
# is always Debug), BUILD_DIR (default build, build-asan for sanitize, build-torch2 for torch2),
# JOBS (default: number of cores), CMAKE_ARGS (more cmake arguments), VENV (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-$(nproc)}
BUILD_TYPE=${BUILD_TYPE:-Release}

# Debian packages only. python3-torch (with python3-numpy) makes test data and
# checks our answers against PyTorch: without it the pytorch.* tests would skip,
# so a fresh machine installs it. graphviz lets the tests check
# `inspect --graph --format dot` with dot. python3 runs the test drivers; time
# (/usr/bin/time) measures the memory of commands in cli.hostile_all.
# prometheus brings promtool, which checks serve's /metrics (pytorch.serve);
# python3-yaml reads docs/openapi/serve.yaml (pytorch.serve_openapi);
# python3-venv lets pytorch.serve_triton pip-install tritonclient[http] into
# build/tests/serve-venv, and pytorch.serve_openapi schemathesis into
# build/tests/openapi-venv. g++
# brings GCC's ASan and UBSan runtimes. ccache, when there, caches compiles
# across the build folders (build/, build-asan/, ...). libstb-dev and
# libjpeg-dev decode pictures (run --input @photo.jpg); python3-pil and python3-torchvision are
# what pytorch.images compares that with.
# pandoc makes the man page from man/tsarchive.1.md at build time (CMakeLists.txt);
# without it the build warns and installs none, and tests/package/deb.sh fails.
# `demo` installs only BUILD_PACKAGES (what the binary and its torch layer
# need) and builds only those two targets; the rest comes with `test`.
BUILD_PACKAGES=(cmake ninja-build g++ pkg-config libtorch-dev libzip-dev zlib1g-dev libcli11-dev nlohmann-json3-dev
                libssl-dev libstb-dev libjpeg-dev ccache)
PACKAGES=("${BUILD_PACKAGES[@]}" catch2 graphviz python3 python3-torch python3-numpy python3-pil python3-torchvision
          time prometheus python3-yaml python3-venv pandoc)
. scripts/debian.sh


# build BUILD_TYPE [CMAKE_ARGS...]: everything, tests included
build() {
  timed "install packages" install_packages "${PACKAGES[@]}"
  timed "build everything" configure_and_build "$@" -DTSARCHIVE_BUILD_TESTS=ON
}

# configure_and_build BUILD_TYPE [CMAKE_ARGS...] [-- TARGET...]
configure_and_build() {
  local type=$1 args=() targets=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && { shift; targets=("$@"); }
  # shellcheck disable=SC2086
  local launcher=()
  if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
    # Paths relative to the checkout, so another clone (CI's) hits the cache.
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  fi
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$type" "${launcher[@]}" "${args[@]}" ${CMAKE_ARGS:-}
  cmake --build "$BUILD_DIR" -j "$JOBS" ${targets[@]:+--target "${targets[@]}"}
}


# A venv with pip's torch; sets TORCH_PREFIX (its libtorch root) and VENV_PY.
# TORCH_PYTHON=/path/to/python uses that interpreter's torch as it is instead
# (no venv, nothing installed): a machine that already has a CUDA PyTorch.
pip_torch() {
  VENV=${VENV:-.venv}
  local want=${TORCH_PIP:-torch==2.13.0}
  if [ -n "${TORCH_PYTHON:-}" ]; then
    VENV_PY=$TORCH_PYTHON
    want="the torch of $VENV_PY"
    "$VENV_PY" -c 'import torch' || { echo "error: TORCH_PYTHON=$VENV_PY cannot import torch" >&2; exit 1; }
  else
    if [ ! -x "$VENV/bin/python" ]; then
      install_packages python3-venv
      echo "==> making $VENV with $want"
      python3 -m venv "$VENV"
    fi
    case $VENV in
      /*) VENV_PY=$VENV/bin/python ;;  # an absolute VENV (a venv shared between checkouts)
      *) VENV_PY=$PWD/$VENV/bin/python ;;
    esac
    if ! "$VENV_PY" -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '${want#torch==}')" 2>/dev/null; then
      echo "==> installing $want (and numpy) into $VENV"
      "$VENV_PY" -m pip install -q "$want" numpy
    fi
  fi
  # The wheel's torch/ folder (lib/, include/, share/cmake/): naming only
  # share/cmake would let TorchConfig.cmake pick up a system libtorch.so.
  TORCH_PREFIX=$("$VENV_PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  local abi
  abi=$("$VENV_PY" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
  if [ "$abi" != 1 ]; then
    echo "error: $want is built with the old C++ ABI; Debian's libzip and CLI11 use the new one" >&2
    exit 1
  fi
}

demo() {
  "$BUILD_DIR/tsarchive" --version
  "$BUILD_DIR/tsarchive" inspect testdata/mlp_scripted.pt
  # Seeded like Python's torch.randn, so the output equals the one Python saved.
  "$BUILD_DIR/tsarchive" run testdata/mlp_scripted.pt --input 2x8 --expect @testdata/run/mlp_out_seed0.pt
}

mode=${1:-}
if [ "$mode" = torch2 ]; then
  mode=${2:-test}
  BUILD_DIR=${BUILD_DIR:-build-torch2}
  pip_torch
  # The wheel's libtorch before Debian's; the tests compare with the venv's torch.
  CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$TORCH_PREFIX -DTSARCHIVE_PYTHON=$VENV_PY ${CMAKE_ARGS:-}"
  torch2=1
fi

case $mode in
  sanitize) BUILD_DIR=${BUILD_DIR:-build-asan} ;;
  *) BUILD_DIR=${BUILD_DIR:-build} ;;
esac

case $mode in
  demo)
    # The tests are built (and their packages installed) by `test`, not here:
    # a first run shows the tool as soon as it can.
    timed "install build packages" install_packages "${BUILD_PACKAGES[@]}"
    timed "build tsarchive + torch layer" configure_and_build "$BUILD_TYPE" -DTSARCHIVE_BUILD_TESTS=OFF -- tsarchive tsarchive_torch
    timed "demo" demo
    print_step_times demo
    ;;
  test)
    build "$BUILD_TYPE"
    if [ -n "${torch2:-}" ]; then
      timed "test suite" ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure -R "$TORCH_TESTS"
    else
      timed "test suite" ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure
    fi
    print_step_times test
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
    build "$BUILD_TYPE"
    ;;
  fast)
    build "$BUILD_TYPE"
    ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure -L fast
    ;;
  *)
    echo "usage: scripts/dev.sh demo|test|fast|build|sanitize|torch2 [build|test|demo]" >&2
    exit 2
    ;;
esac
