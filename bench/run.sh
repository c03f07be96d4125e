#!/usr/bin/env bash
# bench/run.sh: what `tsarchive run` costs next to what a user would otherwise
# write, Python's torch.jit.load + m(x), side by side in one run.
#
# (a) whole process, load + one call (what a CI smoke test or a shell loop pays):
#       tsarchive run MODEL --input SPEC --threads T
#       python3 -c 'import torch; m = torch.jit.load(MODEL); m(x)'   (same threads)
#       python3 -c 'import torch'   (the interpreter + torch import alone, for scale)
#       libtorch floor: build/tests/tsarchive_load_check, a plain C++ program
#           linked to libtorch that torch::jit::loads the tiny archive (twice):
#           what any libtorch tool pays (library load + static init), for scale
#     Target: tsarchive <= 0.5x Python for the tiny model.
# (b) per-call latency, the timing loop on its own (load and process start excluded):
#       tsarchive run MODEL --input SPEC --threads T --warmup 20 --iters 200 --json
#           (reads timing.p50_ms and timing.mean_ms)
#       a Python loop: torch.set_num_threads(T), torch.no_grad(), 20 warm-up
#           calls, then time.perf_counter() around each of 200 calls of m(x)
#       a plain C++ loop: build/tests/tsarchive_call_loop (torch::jit::load,
#           the same warm-up, calls and synchronisation, no worker or sandbox):
#           the floor any libtorch program pays, so a gap between tsarchive
#           and this column is tsarchive's, and one between this and Python
#           is libtorch's C++ API against Python's
#     Targets: resnet18 within 5% of Python (p50 ratio <= 1.05);
#     tiny no worse than Python (p50 ratio <= 1.0): the loop itself, argument
#     handling and any per-call checks must not add to the model's time.
#
# Models: tiny = testdata/mlp_scripted.pt (Linear-BN-ReLU-Linear, input 1x8);
# resnet18 = torchvision resnet18(weights=None) scripted into
# bench/out/resnet18.pt by bench/make_run_models.py (input 1x3x224x224).
# Commands are interleaved round-robin; each number is the median over N
# processes (for (b): the median of each process's p50 / mean). No
# assertions: read the verdicts.
#
# DEVICE=cuda (or cuda:N) runs both sides there: the model and input moved to
# the device, and each timed Python call ends with torch.cuda.synchronize()
# (tsarchive's timing loop synchronizes the same way). Default cpu. Where
# either side cannot run on that device (no GPU, a CPU-only torch or build)
# it says so in one line and exits 2 before measuring anything.
#
# Environment: TSARCHIVE (default build/tsarchive), LOAD_CHECK (default
# build/tests/tsarchive_load_check; the floor row is left out when it is
# missing), CALL_LOOP (default build/tests/tsarchive_call_loop; its column
# reads n/a when it is missing), N (default 5), THREADS
# (default 1, given to both sides), WARMUP (20), ITERS (200), MODELS (default
# "tiny resnet18"), PY (default /usr/bin/python3, with torch; torchvision to
# make resnet18).
# Exit: 0 measured, 2 setup error (no torch, no `run` in TSARCHIVE: the
# Python half is still measured and printed), 3 a command failed.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$PWD
N=${N:-5}
THREADS=${THREADS:-1}
WARMUP=${WARMUP:-20}
ITERS=${ITERS:-200}
MODELS=${MODELS:-"tiny resnet18"}
DEVICE=${DEVICE:-cpu}
PY=${PY:-/usr/bin/python3}
OUT=$ROOT/bench/out
die() { echo "bench/run.sh: setup error: $*" >&2; exit 2; }

[[ -x $PY ]] && "$PY" -c 'import torch' 2>/dev/null || die "$PY with torch is needed (the Python side)"
TSARCHIVE=${TSARCHIVE:-$ROOT/build/tsarchive}
LOAD_CHECK=${LOAD_CHECK:-$ROOT/build/tests/tsarchive_load_check}
CALL_LOOP=${CALL_LOOP:-$ROOT/build/tests/tsarchive_call_loop}
[[ -x $TSARCHIVE ]] || { cmake -S . -B build -G Ninja >&2 && ninja -C build -j2 >&2; } || die "build failed"
source bench/device.sh
check_device "$PY" "$TSARCHIVE" "$DEVICE" || exit 2
mkdir -p "$OUT"
if [[ " $MODELS " == *" resnet18 "* && ! -f $OUT/resnet18.pt ]]; then
  echo "making $OUT/resnet18.pt ..." >&2
  "$PY" bench/make_run_models.py "$OUT/resnet18.pt" >&2 || die "making resnet18.pt failed"
fi
# Without the run command the tsarchive half cannot be measured; say so, and
# still measure Python (useful on its own, and tests this script).
HAVE_RUN=1
"$TSARCHIVE" run --help >/dev/null 2>&1 || HAVE_RUN=0

export TSARCHIVE LOAD_CHECK CALL_LOOP N THREADS WARMUP ITERS MODELS PY OUT ROOT HAVE_RUN DEVICE
"$PY" - <<'PYEOF'
import json, os, statistics, subprocess, sys, time

E = os.environ
TS, PY, ROOT, OUT = E["TSARCHIVE"], E["PY"], E["ROOT"], E["OUT"]
N, T, WARMUP, ITERS = int(E["N"]), E["THREADS"], int(E["WARMUP"]), int(E["ITERS"])
HAVE_RUN = E["HAVE_RUN"] == "1"
DEVICE = E["DEVICE"]
# name: (archive, tsarchive --input spec, Python shape)
ALL = {
    "tiny": (os.path.join(ROOT, "testdata", "mlp_scripted.pt"), "1x8", (1, 8)),
    "resnet18": (os.path.join(OUT, "resnet18.pt"), "1x3x224x224", (1, 3, 224, 224)),
}
MODELS = {k: ALL[k] for k in E["MODELS"].split()}
failed = []

# One call in a fresh interpreter: what the user would otherwise run.
PY_ONCE = """import sys, torch
torch.set_num_threads(int(sys.argv[2]))
device = sys.argv[4]
m = torch.jit.load(sys.argv[1], map_location=device)
with torch.no_grad():
    m(torch.randn(*[int(d) for d in sys.argv[3].split("x")], device=device))
if device.startswith("cuda"):
    torch.cuda.synchronize()
"""
# The Python timing loop: the same shape of loop tsarchive's --warmup/--iters
# runs, per-call times in ms on stdout as JSON.
PY_LOOP = """import json, sys, time, torch
torch.set_num_threads(int(sys.argv[2]))
device = sys.argv[6]
m = torch.jit.load(sys.argv[1], map_location=device)
x = torch.randn(*[int(d) for d in sys.argv[3].split("x")], device=device)
warmup, iters = int(sys.argv[4]), int(sys.argv[5])
sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
times = []
with torch.no_grad():
    for _ in range(warmup):
        m(x)
    sync()
    for _ in range(iters):
        t0 = time.perf_counter()
        m(x)
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
times.sort()
print(json.dumps({"p50_ms": times[len(times) // 2], "mean_ms": sum(times) / len(times)}))
"""


def spawn(argv):
    """Wall time of one process, output discarded."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, dict(os.environ),
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
                                       (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)])
    _, status, _ = os.wait4(pid, 0)
    if status != 0:
        failed.append(" ".join(os.path.basename(a) for a in argv[:4]))
    return time.perf_counter() - t0


def loop_stats(argv, key):
    """(p50_ms, mean_ms) reported by one timing-loop process."""
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        failed.append(" ".join(os.path.basename(a) for a in argv[:4]) + ": exit %d: %s"
                      % (r.returncode, r.stderr.strip().splitlines()[-1:] or ""))
        return None
    doc = json.loads(r.stdout)
    timing = doc[key] if key else doc
    return timing["p50_ms"], timing["mean_ms"]


def verdict(ratio, target):
    return "met" if ratio <= target else "MISSED"


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if a and b else "n/a"


# ---- (a) whole process ----------------------------------------------------
cmds = {"python -c 'import torch'": lambda: [PY, "-c", "import torch"]}
if "tiny" in MODELS and os.access(E["LOAD_CHECK"], os.X_OK):
    cmds["libtorch floor (C++ load) tiny"] = lambda: [E["LOAD_CHECK"], MODELS["tiny"][0], MODELS["tiny"][0]]
for name, (archive, spec, _shape) in MODELS.items():
    if HAVE_RUN:
        cmds[f"tsarchive run {name}"] = (lambda a=archive, s=spec:
                                         [TS, "run", a, "--input", s, "--threads", T, "--device", DEVICE])
    cmds[f"python load+call {name}"] = (lambda a=archive, s=spec:
                                        [PY, "-c", PY_ONCE, a, T, s, DEVICE])
for make in cmds.values():
    spawn(make())  # warm-up: page cache, dynamic loader caches
times = {k: [] for k in cmds}
for _ in range(N):
    for k, make in cmds.items():
        times[k].append(spawn(make()) * 1e3)
med = {k: statistics.median(v) for k, v in times.items()}
print(f"\n(a) whole process: load + one call, --device {DEVICE} --threads {T}, median of {N} runs, warm cache")
print(f"  {'command':34s} {'median ms':>10s} {'min ms':>9s} {'x python':>9s}")
for k in cmds:
    model = k.split()[-1]
    base = med.get(f"python load+call {model}") if model in MODELS else None
    print(f"  {k:34s} {med[k]:10.1f} {min(times[k]):9.1f} {fmt_ratio(med[k], base) if base else '':>9s}")
for name in MODELS:
    if HAVE_RUN:
        r = med[f"tsarchive run {name}"] / med[f"python load+call {name}"]
        target = " (target <= 0.50): " + verdict(r, 0.5) if name == "tiny" else ""
        print(f"  verdict {name}: tsarchive / python = {r:.2f}{target}")
floor = med.get("libtorch floor (C++ load) tiny")
if HAVE_RUN and floor:
    print(f"  tsarchive run tiny - libtorch floor = {med['tsarchive run tiny'] - floor:.0f} ms "
          f"(what run adds to loading libtorch and the archive)")

# ---- (b) per-call latency -------------------------------------------------
print(f"\n(b) per call: --device {DEVICE} --threads {T}, {WARMUP} warm-up + {ITERS} timed calls per process, "
      f"median over {N} processes")
print(f"  {'model':10s} {'tsarchive p50':>14s} {'python p50':>11s} {'ratio':>6s} "
      f"{'tsarchive mean':>15s} {'python mean':>12s} {'ratio':>6s} {'C++ p50':>8s}   target (p50 ratio)")
TARGETS = {"tiny": 1.0, "resnet18": 1.05}
for name, (archive, spec, shape) in MODELS.items():
    ts_runs, py_runs, cc_runs = [], [], []
    for _ in range(N):
        if HAVE_RUN:
            s = loop_stats([TS, "run", archive, "--input", spec, "--threads", T, "--device", DEVICE, "--warmup", str(WARMUP),
                            "--iters", str(ITERS), "--json"], "timing")
            if s:
                ts_runs.append(s)
        s = loop_stats([PY, "-c", PY_LOOP, archive, T, spec, str(WARMUP), str(ITERS), DEVICE], None)
        if s:
            py_runs.append(s)
        if os.access(E["CALL_LOOP"], os.X_OK):
            s = loop_stats([E["CALL_LOOP"], archive, spec, DEVICE, T, str(WARMUP), str(ITERS)], None)
            if s:
                cc_runs.append(s)
    m = lambda runs, i: statistics.median(r[i] for r in runs) if runs else None  # noqa: E731
    tp50, tmean, pp50, pmean, cp50 = m(ts_runs, 0), m(ts_runs, 1), m(py_runs, 0), m(py_runs, 1), m(cc_runs, 0)
    show = lambda v: f"{v:.3f}" if v is not None else "n/a"  # noqa: E731
    target = TARGETS.get(name)
    v = f"<= {target:.2f}: {verdict(tp50 / pp50, target)}" if tp50 and pp50 and target else ""
    print(f"  {name:10s} {show(tp50):>14s} {show(pp50):>11s} {fmt_ratio(tp50, pp50):>6s} "
          f"{show(tmean):>15s} {show(pmean):>12s} {fmt_ratio(tmean, pmean):>6s} {show(cp50):>8s}   {v}")

if not HAVE_RUN:
    print(f"\nnote: {TS} has no `run` command: only the Python side was measured", file=sys.stderr)
    sys.exit(2)
if failed:
    print("commands that failed: " + "; ".join(sorted(set(failed))))
    sys.exit(3)
PYEOF
