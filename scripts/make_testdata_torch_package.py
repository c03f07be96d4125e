#!/usr/bin/env python3
"""Makes testdata/torch_package/: a torch.package archive (PackageExporter).

    /usr/bin/python3 scripts/make_testdata_torch_package.py           # Debian's PyTorch 1.13
    /usr/bin/python3 scripts/make_testdata_torch_package.py --prove   # also load it back, and show
                                                                      # that torch.load and torch.jit.load refuse it

scaler_package.pt: one interned module (toypkg/scaler.py, a class Scaler),
`torch` extern, and one pickled object (objects/scaler.pkl: Scaler holding
a float32 tensor [2.0], so one .data/0.storage record). PackageImporter's
load_pickle imports toypkg.scaler from the archive, which runs it: the module
sets toypkg.scaler.IMPORTED = True at import, which --prove checks. Nothing
here loads a file it did not just write.
"""
import os
import sys
import tempfile

import torch
from torch.package import PackageExporter, PackageImporter

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "torch_package")

SCALER = '''import torch

IMPORTED = True  # runs when PackageImporter imports the module


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return x * self.factor
'''


def make(path):
    with tempfile.TemporaryDirectory() as src:
        os.makedirs(os.path.join(src, "toypkg"))
        with open(os.path.join(src, "toypkg", "__init__.py"), "w") as f:
            f.write("")
        with open(os.path.join(src, "toypkg", "scaler.py"), "w") as f:
            f.write(SCALER)
        sys.path.insert(0, src)
        try:
            import toypkg.scaler
            with PackageExporter(path) as exporter:
                exporter.extern("torch.**")
                exporter.intern("toypkg.**")
                exporter.save_pickle("objects", "scaler.pkl", toypkg.scaler.Scaler(torch.tensor([2.0])))
        finally:
            sys.path.remove(src)
            for name in [m for m in sys.modules if m == "toypkg" or m.startswith("toypkg.")]:
                del sys.modules[name]


def prove(path):
    importer = PackageImporter(path)
    scaler = importer.load_pickle("objects", "scaler.pkl")
    assert torch.equal(scaler(torch.ones(2)), torch.tensor([2.0, 2.0]))
    assert importer.import_module("toypkg.scaler").IMPORTED
    for name, load in (("torch.load", torch.load), ("torch.jit.load", torch.jit.load)):
        try:
            load(path)
        except Exception as e:  # PyTorch says which record it misses
            print(f"{name} refuses: {str(e).splitlines()[0]}")
        else:
            raise SystemExit(f"{name} loaded {path}")
    print(f"PackageImporter ({torch.__version__}) loads {os.path.basename(path)}")


def main():
    os.makedirs(ROOT, exist_ok=True)
    path = os.path.join(ROOT, "scaler_package.pt")
    make(path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, torch {torch.__version__})")
    if "--prove" in sys.argv[1:]:
        prove(path)


if __name__ == "__main__":
    main()
