#!/usr/bin/python3
"""Real PyTorch loads archives that carry an embedded signature.

Run by CTest with TSARCHIVE_PYTHON (exit 77, skipped, when torch is missing):

    python3 tests/pytorch/check_signing_embedded.py TSARCHIVE TESTDATA_DIR

`tsarchive sign --embed` and `tsarchive stamp --sign-key` store the signature
as the extra file extra/tsarchive/model.sig. For an archive PyTorch 1.13 wrote
(testdata) and one this PyTorch writes now, each signed copy is loaded with
torch.jit.load: every parameter and buffer and forward's output equal the
original's, torch.jit.load(..., _extra_files={"tsarchive/model.sig": ""})
reads back the bundle `tsarchive extra get` prints, and `tsarchive verify
--key` accepts it; a signed .ptl loads in the lite interpreter and (PyTorch
2.x) torch.export.load(..., extra_files=) reads a signed .pt2's bundle. The
key pair is made here with openssl.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from harness import check, finish

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def run(*args):
    return subprocess.run(list(args), capture_output=True)


def tsarchive(*args):
    r = run(TSARCHIVE, *args)
    if r.returncode != 0:
        raise AssertionError(f"tsarchive {' '.join(args)} failed ({r.returncode}): {r.stderr.decode()}")
    return r.stdout


def state(module):
    return dict(module.state_dict())


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.register_buffer("scale", torch.tensor([2.0]))

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.scale


tmp = tempfile.mkdtemp(prefix="tsarchive-sign-embedded-")
os.chdir(tmp)
for cmd in (["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "k.key"],
            ["openssl", "ec", "-in", "k.key", "-pubout", "-out", "k.pub"]):
    if run(*cmd).returncode != 0:
        print("openssl failed:", " ".join(cmd))
        sys.exit(1)

torch.manual_seed(0)
torch.jit.save(torch.jit.script(Net()), "now.pt")
models = {"mlp_scripted.pt (PyTorch 1.13)": os.path.join(TESTDATA, "mlp_scripted.pt"),
          f"now.pt (PyTorch {torch.__version__})": "now.pt"}

for label, source in models.items():
    original = torch.jit.load(source)
    features = next(v for v in original.state_dict().values() if v.dim() == 2).shape[1]  # the first Linear's inputs
    x = torch.randn(2, features)
    expected = original(x)
    for how in ("sign --embed", "stamp --keep-bytes --sign-key", "stamp --sign-key (re-save)"):
        shutil.copy(source, "signed.pt")
        if how == "sign --embed":
            tsarchive("sign", "signed.pt", "--key", "k.key", "--embed")
        elif how.startswith("stamp --keep-bytes"):
            tsarchive("stamp", "signed.pt", "--keep-bytes", "--sign-key", "k.key", "--no-host", "--no-git")
        else:
            tsarchive("stamp", "signed.pt", "--sign-key", "k.key", "--no-host", "--no-git")
        what = f"{label}, {how}"
        extra = {"tsarchive/model.sig": ""}
        loaded = torch.jit.load("signed.pt", _extra_files=extra)
        bundle = tsarchive("extra", "get", "signed.pt", "tsarchive/model.sig")
        check(extra["tsarchive/model.sig"] == bundle, f"{what}: _extra_files reads back the bundle")
        check(json.loads(bundle)["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json",
              f"{what}: the embedded record is a Sigstore bundle")
        before, after = state(original), state(loaded)
        check(before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before),
              f"{what}: parameters and buffers equal the original's")
        check(torch.equal(loaded(x), expected), f"{what}: forward gives the original's output")
        r = run(TSARCHIVE, "verify", "signed.pt", "--key", "k.pub", "--require-signature")
        check(r.returncode == 0 and b"(embedded)" in r.stdout,
              f"{what}: verify --key accepts the embedded signature: {r.stdout.decode()} {r.stderr.decode()}")

# A lite-interpreter archive and (PyTorch 2.x) a .pt2 take one too.
from torch.jit.mobile import _load_for_lite_interpreter

shutil.copy(os.path.join(TESTDATA, "mlp.ptl"), "signed.ptl")
tsarchive("sign", "signed.ptl", "--key", "k.key", "--embed")
lite = _load_for_lite_interpreter("signed.ptl")
check(lite is not None, "a signed .ptl loads with _load_for_lite_interpreter")
check(run(TSARCHIVE, "verify", "signed.ptl", "--key", "k.pub").returncode == 0, "verify --key of a signed .ptl")
if int(torch.__version__.split(".")[0]) >= 2:
    shutil.copy(os.path.join(TESTDATA, "pt2", "buffers_consts.pt2"), "signed.pt2")
    tsarchive("sign", "signed.pt2", "--key", "k.key", "--embed")
    extra = {"tsarchive/model.sig": ""}
    torch.export.load("signed.pt2", extra_files=extra)
    check(extra["tsarchive/model.sig"] == tsarchive("extra", "get", "signed.pt2", "tsarchive/model.sig").decode(),
          "torch.export.load(extra_files=) reads the embedded bundle of a .pt2")
    check(run(TSARCHIVE, "verify", "signed.pt2", "--key", "k.pub").returncode == 0, "verify --key of a signed .pt2")

shutil.rmtree(tmp, ignore_errors=True)
finish(f"torch {torch.__version__}: {len(models)} models x 3 ways signed and loaded; .ptl"
       f"{' and .pt2' if int(torch.__version__.split('.')[0]) >= 2 else ''} signed and loaded")
