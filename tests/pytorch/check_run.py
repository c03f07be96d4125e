#!/usr/bin/python3
"""Real PyTorch agrees with `tsarchive run`.

Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):

    /usr/bin/python3 tests/pytorch/check_run.py TSARCHIVE TESTDATA_DIR

Every case runs the real binary and compares what it reports or writes with
what Python's torch.jit computes on the same archive and the same inputs:
seeded inputs equal torch.manual_seed + torch.randn; outputs (saved with
--save-outputs, read back by torch.load) equal Python's; the statistics in
--json equal Python's; --expect / --check pass and fail when they should;
NaN/Inf fail; errors give one line and the documented exit code; --record
leaves an archive Python loads, with every other record byte-identical.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import harness
from harness import check, finish

try:
    import numpy as np
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]


def torch_load(path, map_location=None):
    """torch.load of our own files, which hold TorchScript values (tuples,
    dicts, classes): torch 2.6+ loads only plain tensors unless told."""
    return torch.load(path, weights_only=False, map_location=map_location)

RUN = os.path.join(TESTDATA, "run")
MLP = os.path.join(TESTDATA, "mlp_scripted.pt")



def tsarchive(*args, want=0):
    return harness.tsarchive(TSARCHIVE, *args, want=want)


def run_json(*args, want=0):
    p = tsarchive("run", *args, "--json", want=want)
    return json.loads(p.stdout) if p.stdout.strip() else None


def close(a, b, tol=1e-6):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


def same(a, b):
    """Equal values of any nesting of tensors, tuples, lists, dicts and scalars."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


tmp = tempfile.mkdtemp(prefix="tsarchive-run-")
try:
    mlp = torch.jit.load(MLP)

    # Seeded inputs are Python's torch.randn; outputs are Python's, bit for bit.
    torch.manual_seed(3)
    x = torch.randn(4, 8)
    out_pt, in_pt, out_npy = (os.path.join(tmp, n) for n in ("out.pt", "in.pt", "out.npy"))
    doc = run_json(MLP, "--input", "4x8", "--seed", "3", "--save-inputs", in_pt, "--save-outputs", out_pt)
    with torch.no_grad():
        y = mlp(x)
    check(torch.equal(torch_load(in_pt)[0], x), "seeded input equals torch.manual_seed(3); torch.randn(4, 8)")
    check(torch.equal(torch_load(out_pt), y), "saved output equals Python's forward")
    check(doc["schema"] == "tsarchive.run/1" and doc["passed"], "run --json schema and verdict")
    out = doc["outputs"][0]
    check(out["path"] == "out" and out["dtype"] == "float32" and out["shape"] == [4, 3], "output summary")
    yd = y.double()
    for key, value in (("min", yd.min()), ("max", yd.max()), ("mean", yd.mean()), ("std", yd.std())):
        check(close(out[key], value.item()), f"output {key} {out[key]} vs Python's {value.item()}")
    check(out["nan"] == 0 and out["inf"] == 0, "no NaN/Inf in the MLP's output")
    check(doc["inputs"][0]["path"] == "x", "inputs are named by the schema")

    # Replaying saved inputs gives the same outputs; .npy output as NumPy reads it.
    run_json(MLP, "--input", "@" + in_pt, "--expect", "@" + out_pt, "--save-outputs", out_npy)
    check(np.array_equal(np.load(out_npy), y.numpy()), ".npy output equals Python's forward")

    # Python's golden files: --expect passes and fails as it should.
    run_json(MLP, "--input", "@" + os.path.join(RUN, "mlp_in.npy"), "--expect", "@" + os.path.join(RUN, "mlp_out.pt"))
    run_json(MLP, "--input", "2x8", "--seed", "0", "--expect", "@" + os.path.join(RUN, "mlp_out_seed0.pt"))
    off = "@" + os.path.join(RUN, "mlp_out_off.npy")
    doc = run_json(MLP, "--input", "2x8", "--expect", off, want=1)
    c = doc["checks"][0]
    check(not c["passed"] and c["mismatched"] == 1 and c["worst_index"] == [0, 0], f"off-by-0.01 check: {c}")
    check(close(c["max_abs_error"], 0.01, 1e-3), f"max abs error {c['max_abs_error']} vs 0.01")
    run_json(MLP, "--input", "2x8", "--expect", off, "--atol", "0.02", "--rtol", "0")
    run_json(MLP, "--input", "2x8", "--expect", off, "--atol", "out=0.02", "--rtol", "out=0")

    # Nested outputs: paths, values, and a tuple/dict/list saved for Python.
    mio = os.path.join(RUN, "multi_io.pt")
    opts = "@" + os.path.join(RUN, "multi_io_opts.pt")
    doc = run_json(mio, "--input", "2x3", "--input", "json:2.0", "--input", opts, "--save-outputs", out_pt)
    paths = [v["path"] for v in doc["outputs"]]
    check(paths == ["out", "out[0]", "out[1]", 'out[1]["a"]', 'out[1]["b"]', "out[2]", "out[2][0]", "out[2][1]"],
          f"multi_io paths: {paths}")
    torch.manual_seed(0)
    xm = torch.randn(2, 3)
    with torch.no_grad():
        ym = torch.jit.load(mio)(xm, 2.0, torch_load(opts[1:]))
    check(same(torch_load(out_pt), ym), "multi_io outputs equal Python's (tuple, dict, list)")
    run_json(mio, "--input", "2x3", "--input", "json:2.0", "--input", opts, "--expect", "@" + out_pt)
    run_json(mio, "--input", "2x3", "--input", "json:2.0", "--input", 'json:{"a": "2:float32:ones", "b": "3:float32:range"}',
             "--expect", "@" + out_pt)  # tensor specs inside JSON, where the schema wants tensors
    run_json(mio, "--input", "2x3", "--input", "json:0.5", "--input", opts, "--input", "json:3",
             "--expect", "@" + os.path.join(RUN, "multi_io_out_n3.pt"))

    # Strings, ints, lists and class objects.
    doc = run_json(os.path.join(RUN, "strings.pt"), "--input", "2x2", "--input", 'json:"hi"', "--input", "json:[1, 2, 3]")
    values = {v["path"]: v.get("value") for v in doc["outputs"]}
    with torch.no_grad():
        want = torch.jit.load(os.path.join(RUN, "strings.pt"))(torch.randn(2, 2), "hi", [1, 2, 3])
    check([values[f"out[{i}]"] for i in range(3)] == [want[0], want[1], values["out[2]"]] and values["out[3]"] is want[3],
          f"strings: {values} vs {want}")
    check(isinstance(values["out[2]"], float), "a float output is a JSON number")
    doc = run_json(os.path.join(RUN, "classy.pt"), "--input", "2x2")
    kinds = {v["path"]: v["type"] for v in doc["outputs"]}
    check(kinds.get("out") == "object" and doc["outputs"][0].get("class") == "__torch__.models.Box"
          and kinds.get("out.data") == "Tensor" and kinds.get("out.count") == "int", f"class object outputs: {kinds}")
    check(doc["outputs"][2]["value"] == 4, "an int attribute is a JSON number")

    # NaN and Inf fail unless allowed; counts are Python's.
    nf = os.path.join(RUN, "nonfinite.pt")
    doc = run_json(nf, "--input", "3x4", want=1)
    torch.manual_seed(0)
    with torch.no_grad():
        ln = torch.jit.load(nf)(torch.randn(3, 4))
    check(doc["outputs"][0]["nan"] == int(torch.isnan(ln).sum()), "NaN count equals Python's")
    run_json(nf, "--input", "3x4", "--allow-nonfinite")
    run_json(nf, "--input", "3x4", "--method", "safe")
    doc = run_json(nf, "--input", "2x2:float32:zeros", want=1)
    check(doc["outputs"][0]["inf"] == 4, "log(0) is -inf four times")

    # Generated dtypes and fills reach the model as asked.
    doc = run_json(nf, "--method", "safe", "--input", "5:int64:range")
    with torch.no_grad():
        want = torch.jit.load(nf).safe(torch.arange(5))
    check(close(doc["outputs"][0]["max"], want.max().item()), "int64 range input")
    run_json(os.path.join(RUN, "raises.pt"), "--input", "2x3:float64:zeros")

    # The lite interpreter runs a .ptl as Python's _load_for_lite_interpreter does.
    from torch.jit.mobile import _load_for_lite_interpreter
    ptl = os.path.join(TESTDATA, "mlp.ptl")
    run_json(ptl, "--input", "2x8", "--save-outputs", out_pt)
    torch.manual_seed(0)
    xl = torch.randn(2, 8)
    check(torch.allclose(torch_load(out_pt), _load_for_lite_interpreter(ptl)(xl), atol=1e-6), ".ptl output")

    # Timing: keys, counts, a sweep over batch sizes.
    doc = run_json(MLP, "--input", "2x8", "--warmup", "2", "--iters", "7")
    t = doc["timing"]
    check(t["iterations"] == 7 and t["warmup"] == 2 and t["min_ms"] <= t["p50_ms"] <= t["p99_ms"] <= t["max_ms"],
          f"timing: {t}")
    doc = run_json(MLP, "--input", "2x8", "--iters", "3", "--batch-sizes", "1,4,16")
    check([s["batch_size"] for s in doc["sweep"]] == [1, 4, 16], "sweep batch sizes")
    tsarchive("run", MLP, "--input", "@" + os.path.join(RUN, "mlp_in.npy"), "--batch-sizes", "2", want=2)

    # CUDA, where this build's libtorch has it and a device is visible: the
    # outputs equal Python's torch.jit on the same device and the same inputs,
    # and timings synchronize. Otherwise say why it is skipped.
    version = tsarchive("--version", "--verbose").stdout  # loads libtorch: how many devices it sees
    if "cuda built in" in version and " 0 device(s)" not in version:
        cuda_in, cuda_out = os.path.join(tmp, "cuda_in.pt"), os.path.join(tmp, "cuda_out.pt")
        doc = run_json(MLP, "--input", "4x8", "--seed", "5", "--device", "cuda", "--save-inputs", cuda_in,
                       "--save-outputs", cuda_out, "--iters", "5")
        check(doc["device"].startswith("cuda") and doc["outputs"][0]["device"].startswith("cuda"), "ran on CUDA")
        check(doc["timing"]["iterations"] == 5, f"CUDA timing: {doc.get('timing')}")
        if torch.cuda.is_available():
            x = torch_load(cuda_in, "cuda")[0]
            want = torch.jit.load(MLP, map_location="cuda")(x).cpu()
            got = torch_load(cuda_out, "cpu")
            check(torch.allclose(got, want, rtol=1e-5, atol=1e-6),
                  f"CUDA output equals Python's on the same device: max abs {(got - want).abs().max().item()}")
        else:
            print("this python's torch sees no CUDA device: the CUDA output is compared with the CPU's")
            want = torch.jit.load(MLP)(torch_load(cuda_in, "cpu")[0])
            check(torch.allclose(torch_load(cuda_out, "cpu"), want, atol=1e-4), "CUDA output equals the CPU's")
    else:
        print("skipping the CUDA checks: " + ("no CUDA device is visible" if "cuda built in" in version
                                              else "this build's libtorch has no CUDA (Debian's is CPU-only)"))

    # Errors: one line, the documented exit code.
    p = tsarchive("run", MLP, want=2)
    check("needs 1 input: x: Tensor" in p.stderr, f"missing input message: {p.stderr}")
    tsarchive("run", MLP, "--input", "2x8", "--input", "2x8", want=2)
    tsarchive("run", MLP, "--input", "2x8:flaot32", want=2)
    tsarchive("run", MLP, "--input", "2x8", "--method", "nope", want=2)
    p = tsarchive("run", MLP, "--input", "2x4", want=5)
    check("mat1 and mat2 shapes cannot be multiplied" in p.stderr, f"shape mismatch message: {p.stderr}")
    p = tsarchive("run", os.path.join(RUN, "raises.pt"), "--input", "2x3:float32:ones", want=5)
    check("ValueError: raises.pt: input sum is positive" in p.stderr, f"exception message: {p.stderr}")
    # --device cuda fails in one line only where the build or the machine lacks CUDA (decided from
    # what the build reports, so the same check holds on GPU machines).
    if "cuda built in" not in version:
        p = tsarchive("run", MLP, "--input", "2x8", "--device", "cuda", want=5)
        check("CUDA" in p.stderr, f"--device cuda on a CPU-only libtorch: {p.stderr}")
    elif " 0 device(s)" in version:
        p = tsarchive("run", MLP, "--input", "2x8", "--device", "cuda", want=5)
        check("no CUDA device is visible" in p.stderr, f"--device cuda without a visible GPU: {p.stderr}")
    tsarchive("run", MLP, "--input", "@" + os.path.join(tmp, "missing.npy"), want=4)
    tsarchive("run", MLP, "--input", "@" + os.path.join(TESTDATA, "inputs", "lying_header.npy"), want=3)
    tsarchive("run", os.path.join(TESTDATA, "state_dict.pth"), "--input", "2x8", want=3)
    tsarchive("run", os.path.join(TESTDATA, "hostile", "truncated.pt"), "--input", "2x8", want=3)
    tsarchive("run", MLP, "--input", "2x8", "--save-outputs", os.path.join(tmp, "o.npy"), "--method", "scaled")
    tsarchive("run", os.path.join(RUN, "multi_io.pt"), "--input", "2x3", "--input", "json:2.0", "--input", opts,
              "--save-outputs", os.path.join(tmp, "multi.npy"), want=2)
    check(not os.path.exists(os.path.join(tmp, "multi.npy")), "nothing written when the outputs do not fit .npy")

    # --record / --check: a self-checking archive, every other record byte-identical.
    model = os.path.join(tmp, "model.pt")
    shutil.copy(MLP, model)
    run_json(model, "--input", "2x8", "--record")
    before, after = zipfile.ZipFile(MLP), zipfile.ZipFile(model)
    check(all(after.read(i.filename) == before.read(i.filename) for i in before.infolist()),
          "--record keeps every other record")
    files = {"tsarchive/check.json": ""}
    torch.jit.load(model, _extra_files=files)
    check(json.loads(files["tsarchive/check.json"])["method"] == "forward", "Python reads the recorded check")
    inspect = json.loads(tsarchive("inspect", model, "--json").stdout)
    check(inspect.get("run_check", {}).get("method") == "forward", "inspect shows the recorded check")
    doc = run_json(model, "--check")
    check(doc["passed"] and len(doc["checks"]) == 1 and doc["checks"][0]["passed"], "--check replays and passes")
    # A recorded output that no longer matches fails the check.
    bad = os.path.join(tmp, "bad.pt")
    torch.save(y[:2] + 1, bad)
    tsarchive("extra", "set", model, "tsarchive/check_outputs.pt=@" + bad)
    run_json(model, "--check", want=1)
    tsarchive("run", MLP, "--check", want=3)

    # A model's print() (forward and __setstate__) never reaches stdout, and reaches stderr escaped.
    class Printer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.esc = 27  # an attribute, not a constant: 1.13 writes a folded "\x1b" as an octal escape
            # that its own parser refuses

        def forward(self, x):
            e = chr(self.esc)
            print(e + "]0;TITLE" + chr(self.esc - 20) + e + "[31mFAKE: tsarchive: ok" + chr(self.esc - 14))
            line = "}]\""
            for _ in range(500):
                line += "xxxxxxxxxx"
            print(line)
            return x + 1
    printer = os.path.join(tmp, "printer.pt")
    torch.jit.script(Printer()).save(printer)
    p = tsarchive("run", printer, "--input", "2x2", "--json")
    doc = json.loads(p.stdout)
    check(doc["outputs"][0]["shape"] == [2, 2], "run --json of a printing model is the report alone")
    check("\x1b" not in p.stdout + p.stderr and "\r" not in p.stderr, "no control character of the model's prints")
    check("tsarchive: model output: \\x1b]0;TITLE\\x07\\x1b[31mFAKE: tsarchive: ok\\r" in p.stderr,
          "the print is on stderr, escaped and named: " + p.stderr[:300])
    check(p.stderr.count("tsarchive: model output: ") >= 3, "a 5000-byte line comes in pieces: " + p.stderr[-600:])

    # libtorch's warnings are the model's to make: 200 call sites of 4 KiB each come out bounded.
    source = os.path.join(tmp, "warner.py")
    with open(source, "w") as f:
        f.write("import sys, warnings, torch\nclass Warner(torch.nn.Module):\n"
                "    def forward(self, x):\n        pad = '" + "A" * 64 + "'\n"
                "        for _ in range(6):\n            pad = pad + pad\n" +
                "".join(f"        warnings.warn('w{i} ' + pad)\n" for i in range(200)) +
                "        return x + 1\ntorch.jit.script(Warner()).save(sys.argv[1])\n")
    warner = os.path.join(tmp, "warner.pt")
    subprocess.run([sys.executable, source, warner], check=True, capture_output=True)
    p = tsarchive("run", warner, "--input", "2", "--json")
    check(json.loads(p.stdout)["outputs"][0]["shape"] == [2], "a warning model still runs")
    check(len(p.stderr) < 300 * 1024 and "more warnings than are shown" in p.stderr,
          f"warnings bounded: {len(p.stderr)} bytes of stderr")
    # The model's own warnings are named the model's, never libtorch's: its author chose their words.
    check("tsarchive: note: the model warns: w0 AAAA" in p.stderr and "tsarchive: note: libtorch: w0" not in p.stderr,
          "a warnings.warn of the model's code is the model's note: " + p.stderr[:300])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish("ok: tsarchive run agrees with PyTorch")
