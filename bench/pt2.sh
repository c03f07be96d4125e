#!/usr/bin/env bash
# bench/pt2.sh: `tsarchive inspect x.pt2` against Python loading the same file
# torch.export.load for a torch.export program,
# torch._inductor.aoti_load_package for an AOTInductor package (which loads its
# compiled code; inspect never does), on every archive of testdata/pt2/.
#
# Times are wall-clock, whole process (fork+exec to exit), warm page cache:
# every command runs once untimed first; the commands are interleaved
# round-robin so that noise on a shared machine hits them alike; the median is
# reported, with the ratio python / inspect.
#
# Environment:
#   TSARCHIVE  binary to measure (default build/tsarchive)
#   PY         python with torch 2.x (default /work/main/.venv/bin/python, else .venv/bin/python)
#   N          timed runs of inspect (default 15)
#   N_PY       timed runs of each python load (default 3)
#
# Exit status: 0 when everything was measured; 2 on a setup error; 3 when a
# measured command failed.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$PWD
N=${N:-15}
N_PY=${N_PY:-3}
TSARCHIVE=${TSARCHIVE:-$ROOT/build/tsarchive}
if [[ -z ${PY:-} ]]; then
  for candidate in /work/main/.venv/bin/python "$ROOT/.venv/bin/python"; do
    [[ -x $candidate ]] && PY=$candidate && break
  done
fi

die() { echo "bench/pt2.sh: setup error: $*" >&2; exit 2; }
[[ $N =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer (got '$N')"
[[ $N_PY =~ ^[1-9][0-9]*$ ]] || die "N_PY must be a positive integer (got '$N_PY')"
[[ -x $TSARCHIVE ]] || die "$TSARCHIVE is not built (cmake --build build --target tsarchive)"
[[ -n ${PY:-} && -x $PY ]] || die "no python with torch 2.x: set PY (scripts/dev.sh torch2 makes .venv)"
"$PY" -c 'import torch.export' 2>/dev/null || die "$PY has no torch.export (torch 2.x is needed)"

exec /usr/bin/python3 - "$TSARCHIVE" "$PY" "$N" "$N_PY" "$ROOT/testdata/pt2" <<'EOF'
import json, os, statistics, subprocess, sys, time

tsarchive, py, n, n_py, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
failed = False


def run_once(argv):
    global failed
    t0 = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t1 = time.perf_counter()
    if done.returncode != 0:
        failed = True
        print(f"FAILED ({done.returncode}): {' '.join(argv)}: {done.stderr.decode(errors='replace')[-300:]}")
    return t1 - t0


LOAD_PROGRAM = "import sys, torch; torch.export.load(sys.argv[1])"
LOAD_PACKAGE = "import sys, torch, torch._inductor; torch._inductor.aoti_load_package(sys.argv[1])"

torch_version = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                               text=True).stdout.strip()
print(f"tsarchive inspect vs python (torch {torch_version}) on testdata/pt2, warm page cache;")
print(f"median of {n} inspect runs and {n_py} python runs, whole process\n")
print(f"{'archive':<26} {'size':>9} {'python load':<19} {'python ms':>10} {'inspect ms':>11} {'ratio':>7}")
for name in sorted(f for f in os.listdir(folder) if f.endswith(".pt2")):
    path = os.path.join(folder, name)
    doc = json.loads(subprocess.run([tsarchive, "inspect", "--json", path], capture_output=True).stdout or b"{}")
    package = bool(doc.get("pt2", {}).get("aotinductor"))
    inspect_cmd = [tsarchive, "inspect", path]
    python_cmd = [py, "-c", LOAD_PACKAGE if package else LOAD_PROGRAM, path]
    run_once(inspect_cmd), run_once(python_cmd)  # warm-up
    inspect_times, python_times = [], []
    for i in range(max(n, n_py)):
        if i < n:
            inspect_times.append(run_once(inspect_cmd))
        if i < n_py:
            python_times.append(run_once(python_cmd))
    a, b = statistics.median(inspect_times) * 1e3, statistics.median(python_times) * 1e3
    loader = "aoti_load_package" if package else "torch.export.load"
    print(f"{name:<26} {os.path.getsize(path):>9} {loader:<19} {b:>10.1f} {a:>11.1f} {b / a:>6.0f}x")
sys.exit(3 if failed else 0)
EOF
