#!/usr/bin/python3
"""Generate the test data for `tsarchive run` (testdata/run/): small scripted
models with unusual signatures, golden inputs and outputs made by Python's
torch, and expected.json with the facts the tests check.

Regenerate from the repository root with Debian's interpreter (the one that
has torch):

    /usr/bin/python3 scripts/make_run_testdata.py            # writes testdata/run/
    /usr/bin/python3 scripts/make_run_testdata.py OUTDIR     # writes elsewhere

This is separate from scripts/make_testdata.py on purpose: that script's
archives must stay byte-identical, and their code/*.debug_pkl records embed
the checkout path. The model classes are appended at the end of
testdata/models.py (scripting needs their source in a real file), below the
existing classes, so make_testdata.py's output does not change.

Byte identity: like make_testdata.py this re-executes itself with
PYTHONHASHSEED=0; the archives' code/*.debug_pkl embed the absolute path of
testdata/models.py, so regenerating from another checkout path changes those
records (and only those). .npy and torch.save files do not depend on it.

Every output fact in expected.json is computed from the written archives
read back with torch.jit.load, not from the in-memory modules.
"""

import json
import math
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ inside testdata/
sys.path.insert(0, os.path.join(REPO_ROOT, "testdata"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import models  # noqa: E402  (testdata/models.py)

TORCH_VERSION = torch.__version__
# The MLP every golden file is about: made by make_testdata.py, not here.
MLP_ARCHIVE = os.path.join(REPO_ROOT, "testdata", "mlp_scripted.pt")


# --------------------------------------------------------------------------
# Output facts as JSON (strict JSON: non-finite floats become strings)
# --------------------------------------------------------------------------

def json_float(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def nested(values):
    if isinstance(values, list):
        return [nested(v) for v in values]
    return json_float(values) if isinstance(values, float) else values


def describe(v):
    """What a method returned, as the tests compare it: types, shapes, values."""
    if isinstance(v, torch.Tensor):
        d = {
            "type": "Tensor",
            "dtype": str(v.dtype).replace("torch.", ""),
            "shape": list(v.shape),
            "values": nested(v.tolist()),
        }
        if v.is_floating_point():
            d["nan_count"] = int(torch.isnan(v).sum())
            d["posinf_count"] = int(torch.isposinf(v).sum())
            d["neginf_count"] = int(torch.isneginf(v).sum())
        return d
    if isinstance(v, bool):  # before int: bool is an int in Python
        return {"type": "bool", "value": v}
    if isinstance(v, int):
        return {"type": "int", "value": v}
    if isinstance(v, float):
        return {"type": "float", "value": json_float(v)}
    if isinstance(v, str):
        return {"type": "str", "value": v}
    if v is None:
        return {"type": "None"}
    if isinstance(v, tuple):
        return {"type": "Tuple", "items": [describe(x) for x in v]}
    if isinstance(v, list):
        return {"type": "List", "items": [describe(x) for x in v]}
    if isinstance(v, dict):
        # JSON objects lose no order in Python's json, but keep it explicit.
        return {"type": "Dict", "keys": list(v.keys()),
                "values": {k: describe(x) for k, x in v.items()}}
    if isinstance(v, torch._C.ScriptObject):
        qname = v._type().qualified_name()
        attrs = {}
        for name in sorted(n for n in dir(v) if not n.startswith("_")):
            attr = getattr(v, name)
            if not callable(attr):
                attrs[name] = describe(attr)
        return {"type": "Object", "class": qname, "attributes": attrs}
    # A TorchScript class whose Python class is importable comes back as an
    # instance of it (in this process, models.Box).
    qname = torch._jit_internal._qualified_name(type(v))
    return {"type": "Object", "class": qname,
            "attributes": {k: describe(x) for k, x in sorted(vars(v).items())}}


def methods(m):
    return {name: str(m._c._get_method(name).schema) for name in m._c._method_names()}


# --------------------------------------------------------------------------
# Cases: one `tsarchive run` invocation each, with Python's answer
# --------------------------------------------------------------------------

def seeded(shape, seed=0):
    """What `--input AxB --seed N` generates for the FIRST input."""
    torch.manual_seed(seed)
    return torch.randn(shape)


def case(name, archive, args, python_inputs, loaded, method="forward", **facts):
    """`args` are tsarchive run's arguments after MODEL (paths relative to the
    repository root); `python_inputs` are the same values built in Python."""
    fn = getattr(loaded, method)
    entry = {
        "name": name,
        "archive": archive,
        "method": method,
        "args": (["--method", method] if method != "forward" else []) + args,
    }
    try:
        with torch.no_grad():
            out = fn(*python_inputs)
        entry["raises"] = False
        entry["output"] = describe(out)
    except torch.jit.Error as e:
        entry["raises"] = True
        entry["error_contains"] = facts.pop("error_contains")
        assert entry["error_contains"] in str(e), str(e)
        out = None
    entry.update(facts)
    return entry, out


def make_all(outdir):
    os.makedirs(outdir, exist_ok=True)
    p = lambda name: os.path.join(outdir, name)  # noqa: E731
    rel = lambda name: os.path.relpath(p(name), REPO_ROOT)  # noqa: E731  (for args)

    # 1. The archives. manual_seed(0) before each (none has parameters, but
    # keep the habit of make_testdata.py).
    for fname, cls in (("multi_io.pt", models.MultiIO), ("nonfinite.pt", models.NonFinite),
                       ("raises.pt", models.Raises), ("classy.pt", models.Classy),
                       ("strings.pt", models.Strings)):
        torch.manual_seed(0)
        torch.jit.script(cls().eval()).save(p(fname))

    loaded = {f: torch.jit.load(p(f)) for f in
              ("multi_io.pt", "nonfinite.pt", "raises.pt", "classy.pt", "strings.pt")}
    mlp = torch.jit.load(MLP_ARCHIVE)
    archives = {f: {"methods": methods(m), "type": m._c._type().qualified_name()}
                for f, m in loaded.items()}
    archives["../mlp_scripted.pt"] = {"methods": methods(mlp), "type": mlp._c._type().qualified_name()}
    cases = []

    # 2. mlp_scripted.pt goldens. forward takes x: [batch, 8] float32.
    x = seeded((2, 8))
    np.save(p("mlp_in.npy"), x.numpy())
    with torch.no_grad():
        y = mlp(x)
    torch.save(y, p("mlp_out.pt"))
    np.save(p("mlp_out.npy"), y.numpy())
    # The same numbers again, named for the generated-input run (--input 2x8
    # --seed 0): equal to mlp_out.pt by construction, kept as its own file so
    # a test says which promise it checks.
    torch.save(y, p("mlp_out_seed0.pt"))
    # One element off by 0.01: a mismatch under the default tolerances, a
    # match with --atol 0.02.
    off = y.clone()
    off[0, 0] += 0.01
    np.save(p("mlp_out_off.npy"), off.numpy())
    off_diff = float((off - y).abs().max())

    e, _ = case("mlp_npy", "testdata/mlp_scripted.pt", ["--input", "@" + rel("mlp_in.npy")], [x], mlp,
                golden=[rel("mlp_out.pt"), rel("mlp_out.npy")], exit=0)
    cases.append(e)
    e, _ = case("mlp_seed0", "testdata/mlp_scripted.pt", ["--input", "2x8", "--seed", "0"], [x], mlp,
                golden=[rel("mlp_out_seed0.pt")], exit=0)
    cases.append(e)
    e, _ = case("mlp_seed1", "testdata/mlp_scripted.pt", ["--input", "2x8", "--seed", "1"],
                [seeded((2, 8), 1)], mlp, exit=0,
                note="differs from mlp_out_seed0.pt: --expect @mlp_out_seed0.pt must fail (exit 1)")
    cases.append(e)
    e, _ = case("mlp_off", "testdata/mlp_scripted.pt",
                ["--input", "@" + rel("mlp_in.npy"), "--expect", "@" + rel("mlp_out_off.npy")], [x], mlp,
                max_abs_diff=off_diff, mismatched_elements=1, mismatch_index=[0, 0],
                exit=1, passes_with=["--atol", "0.02", "--rtol", "0"],
                note="mlp_out_off.npy is mlp_out.npy with [0, 0] + 0.01")
    cases.append(e)
    e, _ = case("mlp_scaled", "testdata/mlp_scripted.pt", ["--input", "2x8", "--seed", "0"], [x], mlp,
                method="scaled", exit=0, note="scale takes its default, 2.0")
    cases.append(e)
    e, _ = case("mlp_scaled_3", "testdata/mlp_scripted.pt",
                ["--input", "2x8", "--input", "json:3.0", "--seed", "0"], [x, 3.0], mlp,
                method="scaled", exit=0)
    cases.append(e)

    # 3. multi_io.pt: x generated (first input, seed 0), scale from JSON,
    # opts from a torch.save'd dict (or JSON with tensor specs: ones and range
    # draw no random numbers, so both give the same values), n default or 3.
    opts = {"a": torch.ones(2), "b": torch.arange(3, dtype=torch.float32)}
    torch.save(opts, p("multi_io_opts.pt"))
    x = seeded((2, 3))
    mio = loaded["multi_io.pt"]
    base = ["--input", "2x3", "--input", "json:0.5"]
    e, out = case("multi_io", "testdata/run/multi_io.pt",
                  base + ["--input", "@" + rel("multi_io_opts.pt"), "--seed", "0"], [x, 0.5, opts], mio,
                  golden=[rel("multi_io_out.pt")], exit=0,
                  same_as_args=base + ["--input", 'json:{"a": "2:float32:ones", "b": "3:float32:range"}',
                                       "--seed", "0"])
    torch.save(out, p("multi_io_out.pt"))
    cases.append(e)
    e, out = case("multi_io_n3", "testdata/run/multi_io.pt",
                  base + ["--input", "@" + rel("multi_io_opts.pt"), "--input", "json:3", "--seed", "0"],
                  [x, 0.5, opts, 3], mio, golden=[rel("multi_io_out_n3.pt")], exit=0)
    torch.save(out, p("multi_io_out_n3.pt"))
    cases.append(e)

    # 4. nonfinite.pt: NaN/Inf is a failed check (exit 1) unless --allow-nonfinite.
    nf = loaded["nonfinite.pt"]
    for name, spec, value, method, code in (
            ("nonfinite_seed0", "2x3", seeded((2, 3)), "forward", 1),
            ("nonfinite_zeros", "2x3:float32:zeros", torch.zeros(2, 3), "forward", 1),
            ("nonfinite_ones", "2x3:float32:ones", torch.ones(2, 3), "forward", 0),
            ("nonfinite_safe_seed0", "2x3", seeded((2, 3)), "safe", 0)):
        e, _ = case(name, "testdata/run/nonfinite.pt", ["--input", spec, "--seed", "0"], [value], nf,
                    method=method, exit=code,
                    **({"exit_with_allow_nonfinite": 0} if code == 1 else {}))
        cases.append(e)

    # 5. raises.pt: raises only when x.sum() > 0 (libtorch failed: exit 5).
    r = loaded["raises.pt"]
    for name, spec, value in (("raises_ones", "2x3:float32:ones", torch.ones(2, 3)),
                              ("raises_zeros", "2x3:float32:zeros", torch.zeros(2, 3)),
                              ("raises_seed0", "2x3", seeded((2, 3)))):
        positive = bool(value.sum() > 0)
        extra = {"error_contains": "raises.pt: input sum is positive"} if positive else {}
        e, _ = case(name, "testdata/run/raises.pt", ["--input", spec, "--seed", "0"], [value], r,
                    exit=5 if positive else 0, input_sum=float(value.sum()), **extra)
        cases.append(e)

    # 6. classy.pt: the result is a TorchScript class object (__torch__.models.Box).
    e, _ = case("classy_range", "testdata/run/classy.pt", ["--input", "2x3:float32:range"],
                [torch.arange(6, dtype=torch.float32).reshape(2, 3)], loaded["classy.pt"], exit=0)
    cases.append(e)

    # 7. strings.pt: str / int list in; (str, int, float, bool) out.
    e, _ = case("strings", "testdata/run/strings.pt",
                ["--input", "2x3:float32:ones", "--input", 'json:"cat"', "--input", "json:[1, 2, 3]"],
                [torch.ones(2, 3), "cat", [1, 2, 3]], loaded["strings.pt"], exit=0)
    cases.append(e)
    e, _ = case("strings_empty", "testdata/run/strings.pt",
                ["--input", "1:float32:zeros", "--input", 'json:""', "--input", "json:[]"],
                [torch.zeros(1), "", []], loaded["strings.pt"], exit=0)
    cases.append(e)

    expected = {
        "torch_version": TORCH_VERSION,
        "generator": "scripts/make_run_testdata.py",
        "notes": [
            "args: tsarchive run arguments after MODEL; paths relative to the repository root",
            "exit: the exit code the run contract gives (0 ok, 1 check failed, 5 libtorch failed)",
            "non-finite floats are the strings nan, inf, -inf",
            "--input AxB --seed N is torch.manual_seed(N); torch.randn(A, B) for the first input",
        ],
        "archives": archives,
        "cases": cases,
    }
    with open(p("expected.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True, allow_nan=False)
        f.write("\n")

    for name in sorted(os.listdir(outdir)):
        size = os.path.getsize(p(name))
        assert size < 100 * 1024, (name, size)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO_ROOT, "testdata", "run")
    make_all(os.path.abspath(outdir))
    print("wrote run test data to %s (torch %s)" % (outdir, TORCH_VERSION))


if __name__ == "__main__":
    main()
