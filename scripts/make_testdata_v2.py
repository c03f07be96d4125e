#!/usr/bin/env python3
"""Writes testdata/torch2/: archives from PyTorch 2.x (torch==2.13.0, CPU
wheel), with golden outputs from the same PyTorch, for the cross-version tests
(tests/pytorch/check_versions.py) in both builds.

Run from the repository root with the venv scripts/dev.sh torch2 makes:

    .venv/bin/python scripts/make_testdata_v2.py

Writes, for each model NAME, NAME.pt (or .ptl), NAME_in.npy (a fixed input)
and NAME_out.npy (what this PyTorch returns for it); expected.json holds the
facts the tests compare with (versions, records, parameters, operators) and
the torch version that wrote them. Module classes are testdata/models.py's
plus SDPA below (a separate module, so 1.13's Python can still import them).
"""

import json
import os
import sys
import zipfile

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "testdata"))
import models  # noqa: E402

OUT = os.path.join(REPO_ROOT, "testdata", "torch2")
EXTRA = {"labels.json": '{"classes": ["cat", "dog", "bird"]}', "written_by.txt": "torch " + torch.__version__}


class SDPA(nn.Module):
    """Self-attention through F.scaled_dot_product_attention (PyTorch 2.0+):
    an operator libtorch 1.13 does not have."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v)


def warm_up_batchnorm(m, make):
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(make())
    m.eval()


def records(path):
    with zipfile.ZipFile(path) as z:
        names = [i.filename.split("/", 1)[1] for i in z.infolist()]
        top = z.infolist()[0].filename.split("/", 1)[0]
        version = z.read(top + "/version").decode().strip() if top + "/version" in z.namelist() else None
        bytecode = None
        if top + "/bytecode.pkl" in z.namelist():
            bytecode = z.read(top + "/bytecode.pkl")[3]  # PROTO 2, BININT1 <version>
    return names, version, bytecode


def main():
    assert torch.__version__.startswith("2."), "run with PyTorch 2.x (.venv/bin/python)"
    os.makedirs(OUT, exist_ok=True)
    p = lambda name: os.path.join(OUT, name)  # noqa: E731
    facts = {"torch": torch.__version__, "models": {}}

    def golden(name, module, shape, seed, load=torch.jit.load):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(*shape, generator=g)
        np.save(p(name + "_in.npy"), x.numpy())
        reloaded = load(p(name + (".ptl" if load is not torch.jit.load else ".pt")))
        with torch.no_grad():
            y = reloaded(x)
            if module is not None:
                assert torch.allclose(module(x), y), name
        np.save(p(name + "_out.npy"), y.detach().numpy())
        file = name + (".ptl" if load is not torch.jit.load else ".pt")
        names, version, bytecode = records(p(file))
        facts["models"][file] = {
            "input": list(shape), "format_version": int(version) if version else None,
            "bytecode_version": bytecode, "records": names,
            "parameters": len(list(reloaded.parameters())) if hasattr(reloaded, "parameters") else None,
        }

    # Scripted, with extra files.
    torch.manual_seed(0)
    mlp = models.MLP()
    warm_up_batchnorm(mlp, lambda: torch.randn(5, 8))
    scripted = torch.jit.script(mlp)
    scripted.save(p("mlp_scripted.pt"), _extra_files=EXTRA)
    golden("mlp_scripted", scripted, (2, 8), 1)

    # Traced.
    torch.manual_seed(0)
    conv = models.ConvNet()
    warm_up_batchnorm(conv, lambda: torch.randn(2, 3, 16, 16))
    traced = torch.jit.trace(conv, torch.randn(1, 3, 16, 16))
    traced.save(p("convnet_traced.pt"))
    golden("convnet_traced", traced, (1, 3, 16, 16), 2)

    # An operator libtorch 1.13 lacks.
    torch.manual_seed(0)
    sdpa = torch.jit.script(SDPA().eval())
    sdpa.save(p("sdpa.pt"))
    golden("sdpa", sdpa, (1, 4, 8), 3)

    # Lite interpreter.
    scripted._save_for_lite_interpreter(p("mlp.ptl"), _extra_files=EXTRA)
    from torch.jit.mobile import _load_for_lite_interpreter
    golden("mlp", scripted, (2, 8), 1, load=_load_for_lite_interpreter)

    # Frozen.
    torch.manual_seed(0)
    lb = models.LinearBN()
    warm_up_batchnorm(lb, lambda: torch.randn(5, 6))
    frozen = torch.jit.freeze(torch.jit.script(lb.eval()))
    frozen.save(p("frozen.pt"))
    golden("frozen", frozen, (3, 6), 4)

    # Dynamically quantized (qnnpack, as Debian's 1.13 has no fbgemm).
    torch.backends.quantized.engine = "qnnpack"
    torch.manual_seed(0)
    q = torch.ao.quantization.quantize_dynamic(models.QuantMLP().eval(), {nn.Linear}, dtype=torch.qint8)
    qs = torch.jit.script(q)
    qs.save(p("quant_dynamic.pt"))
    golden("quant_dynamic", qs, (2, 8), 5)

    # torch.save in 2.x layout (byteorder, .data/serialization_id, .format_version).
    torch.save(mlp.state_dict(), p("state_dict.pth"))
    names, version, _ = records(p("state_dict.pth"))
    facts["models"]["state_dict.pth"] = {"format_version": int(version), "records": names,
                                         "tensors": len(mlp.state_dict())}
    with open(p("expected.json"), "w") as f:
        json.dump(facts, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %d files to %s with torch %s" % (len(os.listdir(OUT)), OUT, torch.__version__))


if __name__ == "__main__":
    main()
