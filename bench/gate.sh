#!/usr/bin/env bash
# bench/gate.sh: what the checks before libtorch (the gate,
# src/core/provenance/checked_archive.h) cost `tsarchive run` on a big archive, side by
# side in one run:
#   run               tsarchive run MODEL --input 1xN (the gate, then libtorch in its worker)
#   run --no-validate the same without the gate
#   gate alone        run with the torch layer made unfindable (TSARCHIVE_TORCH_LIBRARY=/nonexistent):
#                     open, gate and the worker's start, then exit 5 before libtorch loads;
#                     minus the same with --no-validate, it is the gate's own time
#   python            torch.jit.load(MODEL) and one call, in PY
# BEFORE=/path/to/an/older/tsarchive adds its `run` and `run --no-validate` rows.
#
# The archive: a scripted Linear(16384, 16384), 1 GiB of float32 in one record
# (bench/out/linear-1g.pt, made once with PY). Warm page cache, commands
# interleaved, median of N runs.
#
# Target: `run` within 1.15x of `run --no-validate`.
#
# Environment: TSARCHIVE (default build/tsarchive), PY (default
# /usr/bin/python3, with torch), N (default 3), FEATURES (default 16384).
# Exit: 0 measured (read the verdict), 2 setup error, 3 a command failed.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$PWD
N=${N:-3}
PY=${PY:-/usr/bin/python3}
FEATURES=${FEATURES:-16384}
OUT=$ROOT/bench/out
TSARCHIVE=${TSARCHIVE:-$ROOT/build/tsarchive}
die() { echo "bench/gate.sh: setup error: $*" >&2; exit 2; }

[[ -x $TSARCHIVE ]] || die "no $TSARCHIVE: build first (scripts/dev.sh build)"
[[ -x $PY ]] && "$PY" -c 'import torch' 2>/dev/null || die "$PY with torch is needed to make the archive"
[[ -z ${BEFORE:-} || -x $BEFORE ]] || die "BEFORE=$BEFORE is not an executable"
mkdir -p "$OUT"
MODEL=$OUT/linear-$FEATURES.pt
if [[ ! -s $MODEL ]]; then
  echo "making $MODEL" >&2
  "$PY" -c "import sys, torch; torch.jit.save(torch.jit.script(torch.nn.Linear($FEATURES, $FEATURES)), sys.argv[1])" \
    "$MODEL.tmp" && mv "$MODEL.tmp" "$MODEL"
fi

export TSARCHIVE PY N MODEL FEATURES BEFORE
"$PY" - <<'PYEOF'
import os, statistics, subprocess, sys, time

TS, PY, N, MODEL, F = os.environ["TSARCHIVE"], os.environ["PY"], int(os.environ["N"]), os.environ["MODEL"], os.environ["FEATURES"]
BEFORE = os.environ.get("BEFORE", "")
CALL = "import sys, torch\nm = torch.jit.load(sys.argv[1])\nm(torch.randn(1, int(sys.argv[2])))"
NO_TORCH = dict(os.environ, TSARCHIVE_TORCH_LIBRARY="/nonexistent")

rows = [("run", [TS, "run", MODEL, "--input", "1x" + F], None, 0),
        ("run --no-validate", [TS, "run", MODEL, "--input", "1x" + F, "--no-validate"], None, 0),
        ("gate alone (+ open, worker start)", [TS, "run", MODEL, "--input", "1x" + F], NO_TORCH, 5),
        ("no gate (open, worker start)", [TS, "run", MODEL, "--input", "1x" + F, "--no-validate"], NO_TORCH, 5),
        ("python torch.jit.load + call", [PY, "-c", CALL, MODEL, F], None, 0)]
if BEFORE:
    rows += [("before: run", [BEFORE, "run", MODEL, "--input", "1x" + F], None, 0),
             ("before: run --no-validate", [BEFORE, "run", MODEL, "--input", "1x" + F, "--no-validate"], None, 0)]

def timed(argv, env, want):
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t = time.perf_counter() - t0
    if p.returncode != want:
        sys.exit(f"bench/gate.sh: {' '.join(argv)} exited {p.returncode}, not {want}: {p.stderr.decode()[-400:]}")
    return t

subprocess.run(["cat", MODEL], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
times = {name: [] for name, *_ in rows}
for _ in range(N):
    for name, argv, env, want in rows:
        times[name].append(timed(argv, env, want))
med = {name: statistics.median(t) for name, t in times.items()}
size = os.path.getsize(MODEL)
print(f"archive {MODEL}: {size / 2**30:.2f} GiB, median of {N}")
print(f"{'command':36} {'seconds':>8} {'x run --no-validate':>20}")
base = med["run --no-validate"]
for name, *_ in rows:
    print(f"{name:36} {med[name]:8.2f} {med[name] / base:20.2f}")
gate = med["gate alone (+ open, worker start)"] - med["no gate (open, worker start)"]
print(f"the gate's own time: {gate:.2f} s ({size / 2**30 / max(gate, 1e-9):.1f} GiB/s)")
ratio = med["run"] / base
print(f"verdict: run is {ratio:.2f}x run --no-validate (target <= 1.15): {'met' if ratio <= 1.15 else 'NOT met'}")
PYEOF
