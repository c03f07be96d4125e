#!/usr/bin/python3
"""A model's own code cannot write files through tsarchive.
Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):
    /usr/bin/python3 tests/pytorch/check_sandbox.py TSARCHIVE TESTDATA_DIR
Scripts two modules that call torch.from_file(PATH, shared=True, size=n) and
write into what it maps, which creates PATH or overwrites it: one in
__setstate__ (it runs on every load), one in forward. Every command that hands
them to libtorch (run, inspect --ops, verify --load, stamp, trace, convert)
must leave PATH as it was, exit 5 with one error line that says the write was
refused, and write no output. With TSARCHIVE_NO_SANDBOX=1 the same run does
write PATH: the models are real. First of all, each command refuses them
(exit 8, naming torch.from_file) for their load-safety verdict, loading
nothing; the sandbox is checked past that with --allow-unsafe-load. A plain
model still runs, and --version
--verbose names the sandbox. On a kernel without Landlock only that line and
the note are checked (there is nothing to refuse with).
"""
import os
import subprocess
import sys
import tempfile

from harness import check, finish

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
PAYLOAD = b"PWND"

ON_LOAD = '''
import sys
from typing import Tuple
import torch
class WritesOnLoad(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.written = 0
    def forward(self, x):
        return x + 1
    @torch.jit.export
    def __getstate__(self) -> Tuple[str, bool, int]:
        return (self.path, self.training, self.written)
    @torch.jit.export
    def __setstate__(self, state: Tuple[str, bool, int]) -> None:
        self.path = state[0]
        self.training = state[1]
        t = torch.from_file(self.path, shared=True, size=4, dtype=torch.uint8)
        t.copy_(torch.tensor([80, 87, 78, 68], dtype=torch.uint8))
        self.written = int(t.sum())  # used, so the compiler keeps the write
torch.jit.script(WritesOnLoad(sys.argv[1])).save(sys.argv[2])
'''

ON_FORWARD = '''
import sys
import torch
class WritesOnForward(torch.nn.Module):
    def __init__(self, path: str):
        super().__init__()
        self.path = path
    def forward(self, x):
        t = torch.from_file(self.path, shared=True, size=4, dtype=torch.uint8)
        t.copy_(torch.tensor([80, 87, 78, 68], dtype=torch.uint8))
        return x + t.sum()
torch.jit.script(WritesOnForward(sys.argv[1])).save(sys.argv[2])
'''


def make(source, target, archive):
    # From a file: torch.jit.script reads the class's source.
    script = archive + ".py"
    with open(script, "w") as f:
        f.write(source)
    subprocess.run([sys.executable, script, target, archive], check=True)


def run(*args, env=None):
    return subprocess.run([TSARCHIVE, *args], capture_output=True, text=True, timeout=300, env=env)


def gated(name, p, target):
    """Refused by the load-safety verdict before anything loads."""
    said = p.returncode == 8 and "torch.from_file" in p.stderr and "--allow-unsafe-load" in p.stderr
    untouched = not os.path.exists(target) or open(target, "rb").read() != PAYLOAD
    check(said and untouched, f"{name}: exit {p.returncode}, wanted 8 naming torch.from_file\n{p.stderr}")


def refused(name, p, target, before, output=None):
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 5, f"{name}: exit {p.returncode}, wanted 5\n{p.stderr}")
    check(len(lines) == 1 and lines[0].startswith("tsarchive: error: "), f"{name}: wanted one error line, got {p.stderr!r}")
    check("sandbox" in p.stderr and ("Permission denied" in p.stderr or "not permitted" in p.stderr),
          f"{name}: the error does not say the sandbox refused a write: {p.stderr!r}")
    now = open(target, "rb").read() if os.path.exists(target) else None
    check(now == before, f"{name}: {target} is {now!r}, was {before!r}")
    if output is not None:
        check(not os.path.exists(output), f"{name}: {output} was written")


def main():
    version = run("--version", "--verbose")
    line = [l for l in version.stdout.splitlines() if l.startswith("sandbox ")]
    check(version.returncode == 0 and len(line) == 1, f"--version --verbose: no sandbox line\n{version.stdout}")
    off = run("--version", "--verbose", env=dict(os.environ, TSARCHIVE_NO_SANDBOX="1"))
    check("sandbox      off (TSARCHIVE_NO_SANDBOX=1)" in off.stdout, f"TSARCHIVE_NO_SANDBOX=1: {off.stdout}")
    if not line or "landlock" not in line[0]:
        print(f"no Landlock here ({line}): nothing to refuse a write with; the rest is skipped")
        p = run("run", os.path.join(TESTDATA, "mlp_scripted.pt"), "--input", "2x8")
        check(p.returncode == 0 and "tsarchive: note: the libtorch worker" in p.stderr, f"no note: {p.stderr}")
        finish("check_sandbox: the sandbox is reported as missing")
        return

    with tempfile.TemporaryDirectory() as tmp:
        created = os.path.join(tmp, "created")      # does not exist: from_file would create it
        existing = os.path.join(tmp, "existing")    # exists: from_file would overwrite it
        with open(existing, "wb") as f:
            f.write(b"keep")
        on_load = {t: os.path.join(tmp, f"on_load_{i}.pt") for i, t in enumerate((created, existing))}
        for target, archive in on_load.items():
            make(ON_LOAD, target, archive)
        on_forward = os.path.join(tmp, "on_forward.pt")
        make(ON_FORWARD, created, on_forward)
        check(not os.path.exists(created), "saving the models wrote the target")

        # Overwriting an existing file: one command is enough (the same open).
        unsafe = "--allow-unsafe-load"
        gated("run (existing)", run("run", on_load[existing], "--input", "2"), existing)
        refused("run (existing)", run("run", on_load[existing], "--input", "2", unsafe), existing, b"keep")
        for target, archive in [(created, on_load[created])]:
            before = None
            what = os.path.basename(target)
            for command in (["run", archive, "--input", "2"], ["inspect", "--ops", archive],
                            ["stamp", archive, "-o", os.path.join(tmp, "stamped.pt")],
                            ["trace", archive, "--input", "2", "-o", os.path.join(tmp, "traced.pt")],
                            ["convert", archive, "-o", os.path.join(tmp, "converted.pt")]):
                gated(f"{command[0]} ({what})", run(*command), target)
            refused(f"run ({what})", run("run", archive, "--input", "2", unsafe), target, before)
            refused(f"inspect --ops ({what})", run("inspect", "--ops", archive, unsafe), target, before)
            # verify's load-safety verdict names torch.from_file before anything loads.
            p = run("verify", "--load", archive)
            check(p.returncode == 8 and "torch.from_file" in p.stderr and not os.path.exists(target),
                  f"verify --load ({what}): exit {p.returncode}, wanted 8 naming torch.from_file\n{p.stderr}")
            out = os.path.join(tmp, "stamped.pt")
            refused(f"stamp ({what})", run("stamp", archive, "-o", out, unsafe), target, before, out)
            out = os.path.join(tmp, "traced.pt")
            refused(f"trace ({what})", run("trace", archive, "--input", "2", "-o", out, unsafe), target, before, out)
            out = os.path.join(tmp, "converted.pt")
            refused(f"convert ({what})", run("convert", archive, "-o", out, unsafe), target, before, out)
        gated("run (on forward)", run("run", on_forward, "--input", "2"), created)
        refused("run (on forward)", run("run", on_forward, "--input", "2", unsafe), created, None)
        # The models do write without the sandbox: the refusals above are the sandbox's.
        unsandboxed = run("run", on_forward, "--input", "2", unsafe, env=dict(os.environ, TSARCHIVE_NO_SANDBOX="1"))
        check(unsandboxed.returncode == 0 and open(created, "rb").read() == PAYLOAD,
              f"TSARCHIVE_NO_SANDBOX=1: exit {unsandboxed.returncode}, {unsandboxed.stderr}")

    p = run("run", os.path.join(TESTDATA, "mlp_scripted.pt"), "--input", "2x8")
    check(p.returncode == 0 and p.stderr == "", f"a plain model under the sandbox: exit {p.returncode}, {p.stderr}")
    finish("check_sandbox: a model's writes are refused by every command that loads it")


if __name__ == "__main__":
    main()
