#!/usr/bin/env bash
# bench/isolation.sh: what running libtorch in a worker process costs each
# command, side by side in one run: the same command with the worker (the
# default) and in-process (TSARCHIVE_IN_PROCESS=1, which calls libtorch in
# the tsarchive process itself), interleaved, wall time of the whole process.
# The difference is fork, the pipe, encoding the result (CBOR) and the
# parent's reaping; the 0.5-0.7 s of loading libtorch is paid either way.
# The cost can be negative: the worker ends with _exit and skips libtorch's
# teardown at exit (static destructors, thread pools), which in-process runs.
#
# Commands: --version --verbose; verify --load; run (mlp_scripted.pt, 2x8);
# run --save-outputs on resnet18 (a larger result crossing the pipe, when
# bench/out/resnet18.pt exists: bench/make_run_models.py makes it);
# inspect --ops.
# Target: isolation costs < 50 ms per command (median difference).
#
# Then the worker's sandbox (src/worker/sandbox.h: Landlock + seccomp, a temp
# folder per job): `run` on the bundled mlp_scripted.pt with the sandbox (the
# default) and without (TSARCHIVE_NO_SANDBOX=1), interleaved, medians and
# their ratio.
# No assertions: read the verdicts.
# Environment: TSARCHIVE (default build/tsarchive), N (default 11).
# Exit: 0 measured, 2 setup error, 3 a command failed.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$PWD
N=${N:-11}
TSARCHIVE=${TSARCHIVE:-$ROOT/build/tsarchive}
[[ -x $TSARCHIVE ]] || { echo "bench/isolation.sh: setup error: no $TSARCHIVE (build first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

commands=(
  "--version --verbose"
  "verify --load testdata/mlp_scripted.pt"
  "run testdata/mlp_scripted.pt --input 2x8"
  "inspect --ops testdata/mlp.ptl"
)
if [[ -f bench/out/resnet18.pt ]]; then
  commands+=("run bench/out/resnet18.pt --input 8x3x224x224 --save-outputs $work/out.npy")
fi

python3 - "$TSARCHIVE" "$N" "${commands[@]}" <<'PY'
import os, statistics, subprocess, sys, time
tsarchive, n, commands = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def timed(args, in_process, sandbox=True):
    env = dict(os.environ, TSARCHIVE_IN_PROCESS="1" if in_process else "0",
               TSARCHIVE_NO_SANDBOX="0" if sandbox else "1")
    t0 = time.perf_counter()
    r = subprocess.run([tsarchive] + args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode != 0:
        sys.stderr.write("bench/isolation.sh: failed (%d): %s\n%s" % (r.returncode, " ".join(args), r.stderr.decode()))
        sys.exit(3)
    return ms

print("libtorch in a worker process vs in-process: wall ms per command, median over %d interleaved pairs" % n)
print("  %-62s %10s %10s %9s" % ("command", "in-process", "worker", "cost"))
worst = float('-inf')
for command in commands:
    args = command.split()
    timed(args, False)  # warm the page cache
    inproc, worker, diffs = [], [], []
    for i in range(n):
        order = (False, True) if i % 2 else (True, False)
        pair = {mode: timed(args, mode) for mode in order}
        inproc.append(pair[True])
        worker.append(pair[False])
        diffs.append(pair[False] - pair[True])
    cost = statistics.median(diffs)
    worst = max(worst, cost)
    shown = command if len(command) <= 62 else command[:59] + "..."
    print("  %-62s %10.1f %10.1f %+8.1f" % (shown, statistics.median(inproc), statistics.median(worker), cost))
print("verdict: isolation costs at most %.1f ms per command (median of paired differences; target < 50 ms): %s"
      % (worst, "met" if worst < 50 else "MISSED"))

sandbox_line = [l for l in subprocess.run([tsarchive, "--version", "--verbose"], capture_output=True, text=True)
                .stdout.splitlines() if l.startswith("sandbox")]
args = "run testdata/mlp_scripted.pt --input 2x8".split()
print()
print("the worker's sandbox (%s): wall ms, median over %d interleaved pairs"
      % (sandbox_line[0].split(None, 1)[1] if sandbox_line else "unknown", n))
timed(args, False)
with_sandbox, without = [], []
for i in range(n):
    order = (True, False) if i % 2 else (False, True)
    pair = {mode: timed(args, False, sandbox=mode) for mode in order}
    with_sandbox.append(pair[True])
    without.append(pair[False])
a, b = statistics.median(with_sandbox), statistics.median(without)
print("  %-44s %10s %10s %8s" % ("command", "sandbox", "none", "ratio"))
print("  %-44s %10.1f %10.1f %8.3f" % (" ".join(args), a, b, a / b))
print("verdict: the sandbox costs %+.1f ms per run (x%.3f)" % (a - b, a / b))
PY
