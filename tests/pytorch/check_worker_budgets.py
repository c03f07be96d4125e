#!/usr/bin/python3
"""Native code from a file cannot take more of the user's disk or memory than
the worker's limits, through `run` or `serve`.

Run by CTest:

    python3 tests/pytorch/check_worker_budgets.py TSARCHIVE TESTDATA_DIR HOSTILE_LIBRARY

HOSTILE_LIBRARY is tests/torch/hostile_library.cc built: loaded with
--load-library it runs in the worker, inside the sandbox, as an AOTInductor
package's library would, and (TSARCHIVE_TEST_HOSTILE) writes 4 MiB files into
the worker's temporary folder until stopped, or does so (or allocates memory)
on a thread of its own a second after the model is loaded.
- `run --disk-limit 64M`: exit 5, one line naming the disk limit, and nothing
  of what it wrote left in TMPDIR;
- `serve --disk-limit 64M` and `serve --memory-limit 400M`: the model loads and
  answers; its worker, writing or allocating while no request is in flight,
  is stopped at the limit and restarted (the server says so on stderr);
  before, nothing looked at a served worker between requests.
Without the sandbox (TSARCHIVE_NO_SANDBOX=1) a worker has no folder of its own to
measure, so only RLIMIT_FSIZE's bound on each file holds: not checked here.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from harness import check, finish, tsarchive

TSARCHIVE, TESTDATA, LIBRARY = sys.argv[1], sys.argv[2], sys.argv[3]
MLP = os.path.join(TESTDATA, "mlp_scripted.pt")


def environment(mode, tmp):
    env = dict(os.environ, TSARCHIVE_TEST_HOSTILE=mode, TMPDIR=tmp)
    env.pop("TSARCHIVE_NO_SANDBOX", None)
    return env


def leftovers(tmp):
    """What of the hostile library's files is still below `tmp`."""
    found = []
    for root, _, files in os.walk(tmp):
        found += [os.path.join(root, f) for f in files if f.startswith("hostile-")]
    return found


def check_run():
    with tempfile.TemporaryDirectory() as tmp:
        began = time.monotonic()
        p = subprocess.run([TSARCHIVE, "run", MLP, "--load-library", LIBRARY, "--disk-limit", "64M"],
                           capture_output=True, text=True, timeout=300, env=environment("disk", tmp))
        took = time.monotonic() - began
        check(p.returncode == 5, f"run with a library that fills the disk: exit {p.returncode}, wanted 5\n{p.stderr}")
        lines = p.stderr.strip().splitlines()
        check(len(lines) == 1 and lines[0].startswith("tsarchive: error: ") and "disk limit (64.0 MiB, --disk-limit)" in lines[0],
              f"run: wanted one error line naming the disk limit, got {p.stderr!r}")
        check(took < 60, f"run: stopped after {took:.1f} s")
        check(not leftovers(tmp), f"run: left {leftovers(tmp)}")


def serve_until(mode, limit_flag, limit, wanted):
    """Starts serve with the library in `mode`, sends one request once it is up,
    and waits (at most a minute) for a stderr line containing every string of
    `wanted`; returns whether one came."""
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.Popen([TSARCHIVE, "serve", MLP, "--port", "0", "--load-library", LIBRARY, limit_flag, limit],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(mode, tmp))
        seen = threading.Event()
        said = []

        def read_stderr():
            for line in p.stderr:
                said.append(line)
                if all(w in line for w in wanted):
                    seen.set()

        threading.Thread(target=read_stderr, daemon=True).start()
        try:
            line = p.stdout.readline()
            check(line.startswith("tsarchive serve: http://127.0.0.1:"), f"serve {mode}: did not start: {line!r} {said}")
            if not line:
                return False
            port = int(line.split()[2].rsplit(":", 1)[1].split("/")[0])
            body = b'{"inputs":[{"name":"x","shape":[1,8],"datatype":"FP32","data":[1,2,3,4,5,6,7,8]}]}'
            request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/mlp_scripted/infer", data=body,
                                             headers={"Content-Type": "application/json"})
            try:
                status = urllib.request.urlopen(request, timeout=60).status
            except urllib.error.HTTPError as e:
                status = e.code
            check(status == 200, f"serve {mode}: the first request got {status}")
            ok = seen.wait(60)
            check(ok, f"serve {mode}: no line with {wanted} within a minute; stderr: {''.join(said)[-2000:]}")
            return ok
        finally:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
            check(not leftovers(tmp), f"serve {mode}: left {leftovers(tmp)}")


def main():
    version = subprocess.run([TSARCHIVE, "--version", "--verbose"], capture_output=True, text=True).stdout
    if "landlock" not in version.lower() or "seccomp" not in version.lower():
        print("the worker's sandbox is not whole on this kernel; skipping")
        sys.exit(77)
    check_run()
    serve_until("disk-later", "--disk-limit", "64M", ["between requests", "disk limit (64.0 MiB, --disk-limit)"])
    serve_until("memory-later", "--memory-limit", "400M", ["between requests", "memory limit (400 MiB"])
    finish("worker budgets: run and serve stop native code at --disk-limit and --memory-limit")


main()
