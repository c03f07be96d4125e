#!/usr/bin/python3
"""Real PyTorch reads every archive `tsarchive extra` writes.

Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):

    /usr/bin/python3 tests/pytorch/check_extra_edits.py TSARCHIVE TESTDATA_DIR

For each model it edits a copy in every way the CLI offers (set, replace,
rm, --in-place, -o, import), then loads the result with
torch.jit.load(..., _extra_files=...) and checks that the extra files read
back exactly, that every parameter and buffer is bitwise equal to the
original's, and that forward gives bitwise the same output.
"""

import os
import shutil
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
failures = []


def tsarchive(*args, stdin=None):
    result = subprocess.run([TSARCHIVE, *args], input=stdin, capture_output=True)
    if result.returncode != 0:
        raise AssertionError(f"tsarchive {' '.join(args)} failed: {result.stderr.decode()}")


def state(module):
    return {k: v for k, v in list(module.state_dict().items())}


def check(label, path, original_path, expected_extra, example=None):
    extra = {name: "" for name in expected_extra}
    extra["never-there"] = ""
    loaded = torch.jit.load(path, _extra_files=extra)
    original = torch.jit.load(original_path)
    problems = []
    for name, want in expected_extra.items():
        got = extra[name] or b""  # torch leaves a name it does not find as given, or empty
        if got != want:
            problems.append(f"extra {name!r}: got {got[:40]!r}, want {want[:40]!r}")
    if extra["never-there"]:
        problems.append("an extra file that was never written read back non-empty")
    a, b = state(loaded), state(original)
    if a.keys() != b.keys():
        problems.append("state_dict keys differ")
    for key in a.keys() & b.keys():
        x, y = a[key], b[key]
        same = x.dtype == y.dtype and x.shape == y.shape and (
            torch.equal(x.int_repr(), y.int_repr()) if x.is_quantized else
            torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)))
        if not same:
            problems.append(f"tensor {key} differs")
    if example is not None:
        loaded.eval(), original.eval()
        with torch.no_grad():
            if not torch.equal(loaded(example), original(example)):
                problems.append("forward output differs")
    status = "ok" if not problems else "FAILED: " + "; ".join(problems)
    print(f"{label:45s} {status}")
    if problems:
        failures.append(label)


MODELS = {
    "mlp_scripted.pt": torch.zeros(2, 8).normal_(generator=torch.Generator().manual_seed(0)),
    "convnet_traced.pt": None,
    "quant_dynamic.pt": None,
    "gru_scripted.pt": None,
    "frozen.pt": None,
    "dtypes.pt": None,
}

with tempfile.TemporaryDirectory() as tmp:
    for model, example in MODELS.items():
        original = os.path.join(TESTDATA, model)
        if not os.path.exists(original):
            continue
        extra = {"labels.json": "", "model_card.md": "", "config/train.yaml": ""}
        torch.jit.load(original, _extra_files=extra)
        existing = {k: v for k, v in extra.items() if v}
        edited = os.path.join(tmp, model)

        shutil.copy(original, edited)
        tsarchive("extra", "set", edited, "producer.json={\"by\": \"tsarchive\"}", "notes/readme.txt=@-",
                  stdin=b"line one\nline two\n")
        want = dict(existing, **{"producer.json": b'{"by": "tsarchive"}', "notes/readme.txt": b"line one\nline two\n"})
        check(f"{model}: set two new", edited, original, want, example)

        if existing:
            first = next(iter(existing))
            tsarchive("extra", "set", edited, f"{first}=replaced value of another length")
            want[first] = b"replaced value of another length"
            check(f"{model}: replace {first}", edited, original, want, example)
            tsarchive("extra", "rm", edited, first)
            want[first] = b""
            check(f"{model}: rm {first}", edited, original, want, example)

        tsarchive("extra", "set", "--in-place", edited, "inplace.bin=\x01\x02")
        want["inplace.bin"] = b"\x01\x02"
        check(f"{model}: --in-place", edited, original, want, example)

        out = os.path.join(tmp, "out-" + model)
        tsarchive("extra", "rm", edited, "-o", out, "inplace.bin")
        want["inplace.bin"] = b""
        check(f"{model}: rm -o", out, original, want, example)

        folder = os.path.join(tmp, "folder-" + model)
        os.makedirs(os.path.join(folder, "deep/er"))
        with open(os.path.join(folder, "deep/er/x.txt"), "wb") as f:
            f.write(b"x" * 100000)
        tsarchive("extra", "import", out, folder)
        want["deep/er/x.txt"] = b"x" * 100000
        check(f"{model}: import", out, original, want, example)

    # The lite interpreter reads an edited .ptl too.
    ptl = os.path.join(TESTDATA, "mlp.ptl")
    edited = os.path.join(tmp, "mlp.ptl")
    shutil.copy(ptl, edited)
    tsarchive("extra", "set", edited, "labels.json=[1,2]")
    from torch.jit.mobile import _load_for_lite_interpreter
    lite, lite_original = _load_for_lite_interpreter(edited), _load_for_lite_interpreter(ptl)
    x = torch.ones(1, 8)
    same = torch.equal(lite(x), lite_original(x))
    print(f"{'mlp.ptl: lite interpreter after set':45s} {'ok' if same else 'FAILED'}")
    if not same:
        failures.append("mlp.ptl lite")
    check("mlp.ptl: set", edited, ptl, {"labels.json": b"[1,2]"})

if failures:
    print(f"{len(failures)} check(s) failed: {failures}")
    sys.exit(1)
print("all edited archives load in PyTorch with their extra files and identical tensors")
