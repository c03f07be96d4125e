#!/usr/bin/env bash
# bench/pt2_run.sh: `tsarchive run` on an AOTInductor package (.pt2) next to
# Python's torch._inductor.aoti_load_package, side by side in one run.
#
# (a) whole process, load + one call (a CI smoke test, a shell loop):
#       tsarchive run PKG --input SPEC --threads T
#       python -c 'aoti_load_package(PKG)(x)'   (same threads)
#       python -c 'import torch'                (interpreter + import alone, for scale)
# (b) per call, the timing loop alone (load and start excluded):
#       tsarchive run PKG --input SPEC --threads T --warmup W --iters I --json
#       a Python loop over the same compiled model: W warm-up calls, then
#       time.perf_counter() around each of I calls
# Both sides call the same compiled code through AOTIModelPackageLoader
# (Python's through its binding), so (b) measures what each adds per call.
# Commands are interleaved; each number is the median over N processes. No
# assertions: read the ratios.
#
# Environment: TSARCHIVE (default build-torch2/tsarchive: a libtorch 2.x
# build), PY (default .venv/bin/python, the venv of scripts/dev.sh torch2),
# PKG (default testdata/pt2/mlp_dynamic_aoti.pt2), SPEC (default 8x4), N (5),
# THREADS (1), WARMUP (20), ITERS (1000).
# Exit: 0 measured, 2 setup error, 3 a command failed.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
export ROOT=$PWD
export TSARCHIVE=${TSARCHIVE:-$ROOT/build-torch2/tsarchive} PY=${PY:-$ROOT/.venv/bin/python}
export PKG=${PKG:-$ROOT/testdata/pt2/mlp_dynamic_aoti.pt2} SPEC=${SPEC:-8x4}
export N=${N:-5} THREADS=${THREADS:-1} WARMUP=${WARMUP:-20} ITERS=${ITERS:-1000}
die() { echo "bench/pt2_run.sh: setup error: $*" >&2; exit 2; }
[[ -x $PY ]] && "$PY" -c 'from torch._inductor import aoti_load_package' 2>/dev/null ||
  die "$PY with torch 2.x (aoti_load_package) is needed: scripts/dev.sh torch2 makes .venv"
[[ -x $TSARCHIVE ]] || die "$TSARCHIVE is missing: scripts/dev.sh torch2 build"
"$TSARCHIVE" run "$PKG" --input "$SPEC" >/dev/null 2>&1 ||
  die "$TSARCHIVE cannot run $PKG (built against libtorch 1.x?): $("$TSARCHIVE" run "$PKG" --input "$SPEC" 2>&1 | tail -1)"

"$PY" - <<'PYEOF'
import json, os, statistics, subprocess, sys, time

E = os.environ
TS, PY, PKG, SPEC = E["TSARCHIVE"], E["PY"], E["PKG"], E["SPEC"]
N, T, WARMUP, ITERS = int(E["N"]), E["THREADS"], int(E["WARMUP"]), int(E["ITERS"])
failed = []

PY_ONCE = """import sys, torch
from torch._inductor import aoti_load_package
torch.set_num_threads(int(sys.argv[2]))
m = aoti_load_package(sys.argv[1])
with torch.no_grad():
    m(torch.randn(*[int(d) for d in sys.argv[3].split("x")]))
"""
PY_LOOP = """import json, sys, time, torch
from torch._inductor import aoti_load_package
torch.set_num_threads(int(sys.argv[2]))
m = aoti_load_package(sys.argv[1])
x = torch.randn(*[int(d) for d in sys.argv[3].split("x")])
warmup, iters = int(sys.argv[4]), int(sys.argv[5])
times = []
with torch.no_grad():
    for _ in range(warmup):
        m(x)
    for _ in range(iters):
        t0 = time.perf_counter()
        m(x)
        times.append((time.perf_counter() - t0) * 1e3)
times.sort()
print(json.dumps({"p50_ms": times[len(times) // 2], "mean_ms": sum(times) / len(times)}))
"""


def spawn(argv):
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        failed.append(" ".join(os.path.basename(a) for a in argv[:3]))
    return (time.perf_counter() - t0) * 1e3


def loop_stats(argv, key):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        failed.append(f"{os.path.basename(argv[0])}: exit {r.returncode}: {r.stderr.strip()[-200:]}")
        return None
    doc = json.loads(r.stdout)
    timing = doc[key] if key else doc
    return timing["p50_ms"], timing["mean_ms"]


name = os.path.basename(PKG)
cmds = {
    "python -c 'import torch'": [PY, "-c", "import torch"],
    f"tsarchive run {name}": [TS, "run", PKG, "--input", SPEC, "--threads", T],
    f"python aoti_load_package {name}": [PY, "-c", PY_ONCE, PKG, T, SPEC],
}
for argv in cmds.values():
    spawn(argv)  # warm-up: page cache, loader caches
times = {k: [] for k in cmds}
for _ in range(N):
    for k, argv in cmds.items():
        times[k].append(spawn(argv))
med = {k: statistics.median(v) for k, v in times.items()}
py_key = f"python aoti_load_package {name}"
print(f"\n(a) whole process: load + one call of {name} on {SPEC}, --threads {T}, median of {N} runs, warm cache")
print(f"  {'command':52s} {'median ms':>10s} {'min ms':>9s} {'x python':>9s}")
for k in cmds:
    ratio = f"{med[k] / med[py_key]:.2f}" if k != "python -c 'import torch'" else ""
    print(f"  {k:52s} {med[k]:10.1f} {min(times[k]):9.1f} {ratio:>9s}")
print(f"  ratio: tsarchive / python = {med[f'tsarchive run {name}'] / med[py_key]:.2f}")

ts_runs, py_runs = [], []
for _ in range(N):
    s = loop_stats([TS, "run", PKG, "--input", SPEC, "--threads", T, "--warmup", str(WARMUP), "--iters", str(ITERS),
                    "--json"], "timing")
    if s:
        ts_runs.append(s)
    s = loop_stats([PY, "-c", PY_LOOP, PKG, T, SPEC, str(WARMUP), str(ITERS)], None)
    if s:
        py_runs.append(s)
m = lambda runs, i: statistics.median(r[i] for r in runs) if runs else None  # noqa: E731
tp50, tmean, pp50, pmean = m(ts_runs, 0), m(ts_runs, 1), m(py_runs, 0), m(py_runs, 1)
print(f"\n(b) per call: {WARMUP} warm-up + {ITERS} timed calls per process, --threads {T}, median over {N} processes")
print(f"  {'':10s} {'p50 ms':>9s} {'mean ms':>9s}")
if tp50 is not None:
    print(f"  {'tsarchive':10s} {tp50:9.4f} {tmean:9.4f}")
if pp50 is not None:
    print(f"  {'python':10s} {pp50:9.4f} {pmean:9.4f}")
if tp50 and pp50:
    print(f"  ratio: tsarchive / python = {tp50 / pp50:.2f} (p50), {tmean / pmean:.2f} (mean)")
if failed:
    print("commands that failed: " + "; ".join(sorted(set(failed))))
    sys.exit(3)
PYEOF
