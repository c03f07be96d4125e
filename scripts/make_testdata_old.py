#!/usr/bin/python3
"""Writes testdata/versions/: archives in the conventions of other PyTorch
releases, made by editing testdata/mlp_scripted.pt and testdata/mlp.ptl
(written by make_testdata.py with Debian's torch 1.13).

Old conventions (PyTorch 1.0-1.5), which every libtorch since still reads:
- v1_mlp.pt: `version` 1, no `__parameters__` and no `__buffers__` lists in
  code/ (the writers before 1.2 declared neither; parameters and buffers were
  plain attributes);
- v2_mlp.pt: `version` 2, `__parameters__` lists but no `__buffers__` lists
  (as 1.2-1.5 wrote them).
Both drop the *.debug_pkl records (source ranges into the code as it was)
and are re-assembled with make_hostile.py's ZIP writer, which lays records out
the way PyTorchStreamWriter does.

Newer than any libtorch reads today (a future PyTorch):
- format11_mlp.pt: `version` 11;
- bytecode10_mlp.ptl: mlp.ptl with bytecode version 10 in bytecode.pkl.

Nothing is written unless this interpreter's torch proves each file: the old
ones load (torch.jit.load, in a child process, so a crash is caught) and give
the original's outputs for a fixed input (written as .npy: what `tsarchive run
--input/--expect` read); the newer ones are refused with a version error.

Run from the repository root with Debian's torch 1.13:

    /usr/bin/python3 scripts/make_testdata_old.py
"""

import io
import os
import re
import subprocess
import sys

import numpy as np
import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
from make_hostile import Rec, build, read_recs  # noqa: E402

TESTDATA = os.path.join(REPO_ROOT, "testdata")
OUT = os.path.join(TESTDATA, "versions")


def rewrite(src, version, drop_parameters, drop_buffers, top):
    recs = []
    for r in read_recs(src):
        name = r.name.split("/", 1)[1]
        if name.endswith(".debug_pkl"):
            continue
        data = r.data
        if name in ("version", ".data/version"):
            data = b"%d\n" % version
        elif name.startswith("code/") and name.endswith(".py"):
            text = data.decode()
            if drop_parameters:
                text = re.sub(r"(?m)^  __parameters__ = .*\n", "", text)
            if drop_buffers:
                text = re.sub(r"(?m)^  __buffers__ = .*\n", "", text)
            data = text.encode()
        # PyTorchStreamWriter stores everything (method 0).
        recs.append(Rec(top + "/" + name, data, 0))
    return build(recs)


def child(code, *args):
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


LOAD_AND_RUN = """
import sys, numpy as np, torch
m = torch.jit.load(sys.argv[1])
x = torch.from_numpy(np.load(sys.argv[2]))
np.save(sys.argv[3], m(x).detach().numpy())
print(len(list(m.parameters())), len(list(m.buffers())))
"""

LOAD_MUST_FAIL = """
import sys, torch
try:
    if sys.argv[1].endswith('.ptl'):
        from torch.jit.mobile import _load_for_lite_interpreter
        _load_for_lite_interpreter(sys.argv[1])
    else:
        torch.jit.load(sys.argv[1])
except Exception as e:
    print(str(e).strip().splitlines()[0])
    sys.exit(0)
sys.exit('it loaded')
"""


def main():
    os.makedirs(OUT, exist_ok=True)
    mlp = os.path.join(TESTDATA, "mlp_scripted.pt")
    x = torch.Generator().manual_seed(16)
    inputs = torch.randn(2, 8, generator=x).numpy()
    in_path = os.path.join(OUT, "mlp_in.npy")
    np.save(in_path, inputs)
    expected = torch.jit.load(mlp)(torch.from_numpy(inputs)).detach().numpy()

    made = {}
    for name, version, drop_p, drop_b in (("v1_mlp.pt", 1, True, True), ("v2_mlp.pt", 2, False, True)):
        made[name] = rewrite(mlp, version, drop_p, drop_b, name[:-3])
    made["format11_mlp.pt"] = rewrite(mlp, 11, False, False, "format11_mlp")
    recs = read_recs(os.path.join(TESTDATA, "mlp.ptl"))
    for r in recs:
        if r.name.endswith("/bytecode.pkl"):
            # (version, methods...): PROTO 2, BININT1 <version>, ...
            assert r.data[:4] == b"\x80\x02K\x08", r.data[:8]
            r.data = r.data[:3] + bytes([10]) + r.data[4:]
        r.name = "bytecode10_mlp/" + r.name.split("/", 1)[1]
        r.method = 0
    ptl = build(recs)
    made["bytecode10_mlp.ptl"] = ptl

    tmp = os.path.join(OUT, ".tmp")
    os.makedirs(tmp, exist_ok=True)
    try:
        for name, data in made.items():
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            if name.startswith("v"):
                out = os.path.join(tmp, name + ".npy")
                p = child(LOAD_AND_RUN, path, in_path, out)
                if p.returncode != 0:
                    sys.exit("torch %s does not load %s: %s" % (torch.__version__, name, p.stderr[-2000:]))
                got = np.load(out)
                if not np.array_equal(got, expected):
                    sys.exit("%s gives other outputs than mlp_scripted.pt" % name)
                print("%s: torch %s loads it (parameters, buffers: %s) and its outputs equal the original's"
                      % (name, torch.__version__, p.stdout.strip()))
            else:
                p = child(LOAD_MUST_FAIL, path)
                if p.returncode != 0:
                    sys.exit("torch %s was expected to refuse %s: %s" % (torch.__version__, name, p.stderr[-2000:]))
                print("%s: torch %s refuses it: %s" % (name, torch.__version__, p.stdout.strip()))
        for name, data in made.items():
            os.replace(os.path.join(tmp, name), os.path.join(OUT, name))
        np.save(os.path.join(OUT, "mlp_out.npy"), expected)
    finally:
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
