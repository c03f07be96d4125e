#!/usr/bin/env bash
# The torch layer against a CUDA build of libtorch: pip's torch==2.14.1 (CUDA,
# ~5.5 GB) in .venv-cuda/, built into build-cuda/, then the CPU suite of
# `scripts/dev.sh torch2 test` there (every test that loads libtorch or
# compares with PyTorch). Without a GPU, `run --device cuda` must say so in one
# line (checked below); with one, tests/pytorch/check_run.py also runs on CUDA.
# Needs the CUDA toolkit the wheel's CMake files look for (nvcc, headers).
#   scripts/cuda_check.sh            build and test
#   scripts/cuda_check.sh build      build only
# Environment: as scripts/dev.sh (JOBS, CMAKE_ARGS); TORCH_PIP to try another wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
export TORCH_PIP=${TORCH_PIP:-torch==2.14.1} VENV=${VENV:-.venv-cuda} BUILD_DIR=${BUILD_DIR:-build-cuda}
scripts/dev.sh torch2 "${1:-test}"

t=$BUILD_DIR/tsarchive
"$t" --version
"$t" --version | grep -q '^cuda built in' || { echo "FAIL: $t does not report a CUDA libtorch" >&2; exit 1; }
if "$t" --version | grep -q ' 0 device(s) visible'; then
  set +e
  err=$("$t" run testdata/mlp_scripted.pt --input 2x8 --device cuda 2>&1 >/dev/null)
  status=$?
  set -e
  echo "$err"
  [ "$status" = 5 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ $err == *"no CUDA device is visible"* ]] ||
    { echo "FAIL: run --device cuda without a GPU: exit $status" >&2; exit 1; }
  echo "ok: without a GPU, run --device cuda is one line, exit 5"
fi
