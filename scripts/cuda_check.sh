#!/usr/bin/env bash
# The torch layer against a CUDA build of libtorch, built into build-cuda/:
#   scripts/cuda_check.sh            build, then the CPU suite of `scripts/dev.sh torch2 test`
#                                    (every test that loads libtorch or compares with PyTorch)
#                                    and the GPU part below
#   scripts/cuda_check.sh build      build only
#   scripts/cuda_check.sh gpu        build (tsarchive, its torch layer and the test programs),
#                                    --version --verbose, pytorch.run and pytorch.pt2_run (which
#                                    run on CUDA where a device is visible), a CUDA AOTInductor
#                                    package compiled here against aoti_load_package, and the CUDA
#                                    benches (bench/run.sh and bench/serve.sh with DEVICE=cuda);
#                                    a few minutes on 16 cores
# The libtorch: pip's torch==2.14.1 (CUDA, ~5.5 GB) in .venv-cuda/, or, with
# TORCH_PYTHON=/path/to/python, the torch that Python already has (no venv,
# nothing installed: a GPU machine with its own CUDA PyTorch).
# Without a GPU, `run --device cuda` must say so in one line (checked below).
# Before building, that Python's torch is asked what it has: exit 3 when it has
# no CUDA (a CPU-only torch: nothing here can be checked), exit 4 for `gpu`
# when it has CUDA but sees no device (the GPU part cannot run); each says so
# in one line.
# Needs the CUDA toolkit the wheel's CMake files look for (nvcc, headers).
# Environment: as scripts/dev.sh (JOBS, CMAKE_ARGS); TORCH_PIP to try another wheel;
# DURATION, CNN_DURATION: bench/serve.sh's seconds per cell (default 3, 5);
# BUILT=1: BUILD_DIR already holds a CUDA build made another way (a machine
# without apt, built from unpacked .deb files): nothing is installed or built,
# the checks and benches run on it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/debian.sh
export TORCH_PIP=${TORCH_PIP:-torch==2.14.1} VENV=${VENV:-.venv-cuda} BUILD_DIR=${BUILD_DIR:-build-cuda}
BUILT=${BUILT:-0}
mode=${1:-test}
case $mode in test | build | gpu) ;; *) echo "usage: scripts/cuda_check.sh [test|build|gpu]" >&2; exit 2 ;; esac
if [ -n "${TORCH_PYTHON:-}" ]; then
  export TORCH_PYTHON
  PYTHON=$TORCH_PYTHON
else
  if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
  "$VENV/bin/python" -c "import torch" 2>/dev/null || "$VENV/bin/python" -m pip install -q "$TORCH_PIP" numpy
  PYTHON=$VENV/bin/python
fi

# What the torch of $PYTHON was built with and what it sees, before any build.
read -r torch_version torch_cuda devices < <("$PYTHON" -c '
import torch
cuda = torch.version.cuda
print(torch.__version__, cuda or "none", torch.cuda.device_count() if cuda else 0)')
if [ "$torch_cuda" = none ]; then
  echo "no CUDA: the torch of $PYTHON ($torch_version) is built without CUDA (torch.version.cuda is None); give TORCH_PYTHON a CUDA PyTorch" >&2
  exit 3
fi
echo "==> torch $torch_version (CUDA $torch_cuda) of $PYTHON: $devices CUDA device(s) visible"
if [ "$mode" = gpu ] && [ "$devices" = 0 ]; then
  echo "no GPU: the torch of $PYTHON has CUDA $torch_cuda but sees no CUDA device (nvidia-smi, CUDA_VISIBLE_DEVICES); the GPU part needs one" >&2
  exit 4
fi

# The wheel's CMake files look for the CUDA toolkit next to nvcc (a wrapper
# in /usr/local/bin is not its root) and for libnvrtc, which a runtime-only
# toolkit lacks; the wheel brings its own (site-packages/nvidia/cu*/lib).
cuda_args=()
if nvcc=$(command -v nvcc); then
  # nvcc may be a wrapper script (exec /usr/local/cuda-X/bin/nvcc "$@").
  real=$(sed -n 's/^exec \(\/[^ ]*nvcc\) .*/\1/p' "$nvcc" 2>/dev/null | head -1)
  root=$(dirname "$(dirname "$(readlink -f "${real:-$nvcc}")")")
  cuda_args+=("-DCUDA_TOOLKIT_ROOT_DIR=$root" "-DCUDAToolkit_ROOT=$root")
  if ! ls "$root"/lib64/libnvrtc.so* >/dev/null 2>&1; then
    site=$("$PYTHON" -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
    nvrtc=$(ls "$site"/nvidia/*/lib/libnvrtc.so* 2>/dev/null | head -1)
    [ -n "$nvrtc" ] && cuda_args+=("-DCUDA_nvrtc_LIBRARY=$nvrtc")
  fi
fi
echo "==> CUDA: ${cuda_args[*]:-(no nvcc found; the CMake files of the wheel say what is missing)}"
case $BUILT:$mode in
  1:*) [ -x "$BUILD_DIR/tsarchive" ] || { echo "BUILT=1 but $BUILD_DIR/tsarchive is not there: build it first" >&2; exit 2; }
       if [ "$mode" = test ]; then
         ctest --test-dir "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --output-on-failure -R "$TORCH_TESTS" || exit 1
       fi ;;
  *:gpu) CMAKE_ARGS="${cuda_args[*]} ${CMAKE_ARGS:-}" scripts/dev.sh torch2 build ;;
  *:build | *:test) CMAKE_ARGS="${cuda_args[*]} ${CMAKE_ARGS:-}" scripts/dev.sh torch2 "$mode" ;;
esac
[ "$mode" = build ] && exit 0

t=$BUILD_DIR/tsarchive
"$t" --version --verbose
"$t" --version | grep -q '^cuda built in' || { echo "FAIL: $t does not report a CUDA libtorch" >&2; exit 1; }
if "$t" --version --verbose | grep -q ' 0 device(s) visible'; then
  set +e
  err=$("$t" run testdata/mlp_scripted.pt --input 2x8 --device cuda 2>&1 >/dev/null)
  status=$?
  set -e
  echo "$err"
  [ "$status" = 5 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ $err == *"no CUDA device is visible"* ]] ||
    { echo "FAIL: run --device cuda without a GPU: exit $status" >&2; exit 1; }
  echo "ok: without a GPU, run --device cuda is one line, exit 5"
fi

# The GPU part: check_run.py runs its CUDA checks where a device is visible
# (and says why it skipped them otherwise); the benches print CUDA ratios.
if "$t" --version --verbose | grep -q ' 0 device(s) visible'; then
  echo "no GPU: $t sees no CUDA device; the GPU part is skipped" >&2
  [ "$mode" = gpu ] && exit 4
  exit 0
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure -R '^pytorch\.(run|pt2_run)$'

# An AOTInductor package compiled for this GPU by this PyTorch: run --device
# cuda gives aoti_load_package's outputs, or fails in one line (exit 5) that
# does not call the package hostile. Compiled in one Python process and loaded
# in another: PyTorch 2.11's own aoti_load_package died with SIGSEGV on such a
# package on an H100 and an H200, and then tsarchive's line is what is checked.
pkg=$BUILD_DIR/cuda_mlp_aoti.pt2
rm -f "$pkg.out.pt"
"$PYTHON" - "$pkg" <<'PYEOF'
import sys, torch
path = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).cuda().eval()
x = torch.randn(4, 8, device="cuda")
torch._inductor.aoti_compile_and_package(torch.export.export(model, (x,)), package_path=path)
torch.save(x.cpu(), path + ".in.pt")
PYEOF
set +e
"$PYTHON" - "$pkg" <<'PYEOF'
import sys, torch
path = sys.argv[1]
out = torch._inductor.aoti_load_package(path)(torch.load(path + ".in.pt").cuda())
torch.save(out.cpu(), path + ".out.pt")
PYEOF
python_status=$?
set -e
"$t" inspect "$pkg" >"$pkg.txt" && head -12 "$pkg.txt"
if [ -f "$pkg.out.pt" ]; then
  "$t" run "$pkg" --device cuda --input "@$pkg.in.pt" --expect "@$pkg.out.pt" --atol 1e-5 --iters 20 ||
    { echo "FAIL: run --device cuda on a CUDA AOTInductor package that PyTorch runs (above: its one line)" >&2; exit 1; }
else
  echo "PyTorch's own aoti_load_package failed on $pkg (exit $python_status); tsarchive must run it or say so in one line"
  set +e
  err=$("$t" run "$pkg" --device cuda --input "@$pkg.in.pt" --iters 20 2>&1 >/dev/null)
  status=$?
  set -e
  echo "$err"
  [ "$status" = 0 ] || { [ "$status" = 5 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ $err != *hostile* ]]; } ||
    { echo "FAIL: run --device cuda on a CUDA AOTInductor package: exit $status" >&2; exit 1; }
fi

DEVICE=cuda PY=$PYTHON TSARCHIVE=$t LOAD_CHECK=$BUILD_DIR/tests/tsarchive_load_check \
  CALL_LOOP=$BUILD_DIR/tests/tsarchive_call_loop N=${N:-3} bench/run.sh
if command -v wrk >/dev/null && "$PYTHON" -c 'import aiohttp' 2>/dev/null; then
  DEVICE=cuda PYTHON=$PYTHON TSARCHIVE=$t DURATION=${DURATION:-3} CNN_DURATION=${CNN_DURATION:-5} bench/serve.sh
else
  echo "bench/serve.sh skipped: it needs wrk and aiohttp for $PYTHON" >&2
fi
