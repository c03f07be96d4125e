#!/usr/bin/env python3
"""Writes testdata/pt2/run/: an AOTInductor package that also holds its
program and sample inputs, for `tsarchive run --sample-inputs`.

torch._inductor.aoti_compile_and_package writes only the compiled artifacts
(testdata/pt2/*_aoti.pt2, made by make_testdata_pt2.py): no models/, no
data/sample_inputs/. PyTorch's PT2 archive writer puts both in one package:
torch.export.pt2_archive._package.package_pt2(exported_programs=...,
aoti_files=...), and aoti_load_package runs it like any other.

Run from the repository root with the venv scripts/dev.sh torch2 makes
(AOTInductor compiles C++: it needs g++):

    .venv/bin/python scripts/make_testdata_pt2_run.py

Writes:
  affine_sample_aoti.pt2  Affine (y = x @ W^T + bias; returns (y, relu(y))),
                          exported with x positional (dynamic batch "batch",
                          1..32) and bias as a keyword argument, so its sample
                          inputs are ((x,), {"bias": b}); compiled on the CPU
                          (portable code, no line tables) and packaged with
                          the ExportedProgram
  foreign_machine_aoti.pt2  affine_sample_aoti.pt2 with AOTI_MACHINE riscv64
                          in its metadata: run refuses it on this machine
  expected.json           the sample inputs' shapes and what
                          aoti_load_package(path)(*args, **kwargs) returned
                          (shapes, sums), for a quick look; the tests compare
                          with PyTorch live (tests/pytorch/check_pt2_run.py)
"""

import io
import json
import os
import shutil
import sys
import tempfile
import zipfile

import torch
from torch import Tensor, nn

from make_testdata_pt2 import PORTABLE  # noqa: E402 (this folder is on sys.path)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO_ROOT, "testdata", "pt2", "run")


class Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 4))

    def forward(self, x: Tensor, bias: Tensor):
        y = x @ self.weight.t() + bias
        return y, torch.relu(y)


def sample_inputs(path):
    with zipfile.ZipFile(path) as z:
        name = [n for n in z.namelist() if n.endswith("/data/sample_inputs/model.pt")][0]
        return torch.load(io.BytesIO(z.read(name)), weights_only=True)


def foreign_machine_copy(source, path):
    """A copy of an AOTInductor package whose metadata says it was compiled
    for riscv64: `run` must refuse it before libtorch loads its code."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("_metadata.json"):
                metadata = json.loads(data)
                metadata["AOTI_MACHINE"] = "riscv64"
                data = json.dumps(metadata).encode()
            out.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), data)


def main():
    from torch._inductor import aot_compile, aoti_load_package
    from torch.export.pt2_archive._package import package_pt2

    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    model = Affine().eval()
    x, bias = torch.randn(2, 4), torch.randn(3)
    batch = torch.export.Dim("batch", min=1, max=32)
    ep = torch.export.export(model, (x,), {"bias": bias}, dynamic_shapes={"x": {0: batch}, "bias": None})

    path = os.path.join(OUT, "affine_sample_aoti.pt2")
    tmp = tempfile.mkdtemp(prefix="tsarchive-aoti-")
    try:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tmp
        os.environ["ATEN_CPU_CAPABILITY"] = "default"  # portable scalar code, as make_testdata_pt2.py
        args, kwargs = ep.example_inputs
        files = aot_compile(ep.module(check_guards=False), args, kwargs,
                            options={"aot_inductor.package": True, **PORTABLE})
        package_pt2(path, exported_programs={"model": ep}, aoti_files={"model": files})
        args, kwargs = sample_inputs(path)
        out = aoti_load_package(path)(*args, **kwargs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    expected = {
        "torch_version": torch.__version__,
        "files": {
            "affine_sample_aoti.pt2": {
                "sample_args": [list(a.shape) for a in args],
                "sample_kwargs": {k: list(v.shape) for k, v in kwargs.items()},
                "outputs": [{"shape": list(o.shape), "sum": float(o.sum())} for o in out],
            }
        },
    }
    foreign_machine_copy(path, os.path.join(OUT, "foreign_machine_aoti.pt2"))
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    for name in sorted(os.listdir(OUT)):
        print(f"{os.path.getsize(os.path.join(OUT, name)):>9}  testdata/pt2/run/{name}")


if __name__ == "__main__":
    sys.exit(main())
