#!/usr/bin/python3
"""The cross-version matrix: archives from three generations of PyTorch, every
command, on whichever libtorch this build links.

Run by CTest with TSARCHIVE_PYTHON (Debian's python3 for the 1.13 build, the
venv's for the 2.x build); exit 77 (skipped) when it has no torch:

    python tests/pytorch/check_versions.py TSARCHIVE TESTDATA_DIR

Archives:
  <=1.5   testdata/versions/v1_mlp.pt, v2_mlp.pt (format 1 and 2, no __buffers__/
          __parameters__ lists; scripts/make_testdata_old.py)
  1.13    testdata/mlp_scripted.pt, mlp.ptl (scripts/make_testdata.py)
  future  testdata/versions/format11_mlp.pt, bytecode10_mlp.ptl (versions no
          libtorch reads yet)
  2.13    testdata/torch2/* (scripts/make_testdata_v2.py): scripted, traced,
          scaled_dot_product_attention, .ptl, frozen, dynamically quantized,
          torch.save
  runtime torch.save at every pickle protocol (2..HIGHEST_PROTOCOL): inspect, verify
Commands: inspect, verify, extra set + rm, stamp (re-save), stamp --keep-bytes,
run (against the writer's golden outputs), trace, convert (--freeze). Each
cell works and matches the writer's outputs, or is refused with exit 3 or 5
and one error line giving the expected reason (EXPECTED below, by the linked
libtorch's major version). Prints the matrix.
"""

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish  # noqa: E402

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
V, T2 = os.path.join(TESTDATA, "versions"), os.path.join(TESTDATA, "torch2")
ENV = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")

# name -> (source, path, input .npy, golden .npy)
MLP_GOLDEN = (os.path.join(V, "mlp_in.npy"), os.path.join(V, "mlp_out.npy"))
ARCHIVES = {
    "v1_mlp.pt": ("<=1.5", os.path.join(V, "v1_mlp.pt"), *MLP_GOLDEN),
    "v2_mlp.pt": ("<=1.5", os.path.join(V, "v2_mlp.pt"), *MLP_GOLDEN),
    "mlp_scripted.pt": ("1.13", os.path.join(TESTDATA, "mlp_scripted.pt"), *MLP_GOLDEN),
    "mlp.ptl": ("1.13", os.path.join(TESTDATA, "mlp.ptl"), *MLP_GOLDEN),
    "format11_mlp.pt": ("future", os.path.join(V, "format11_mlp.pt"), *MLP_GOLDEN),
    "bytecode10_mlp.ptl": ("future", os.path.join(V, "bytecode10_mlp.ptl"), *MLP_GOLDEN),
}
for name in ("mlp_scripted", "convnet_traced", "sdpa", "mlp", "frozen", "quant_dynamic"):
    file = name + (".ptl" if name == "mlp" else ".pt")
    ARCHIVES["2.13 " + file] = ("2.13", os.path.join(T2, file), os.path.join(T2, name + "_in.npy"),
                                os.path.join(T2, name + "_out.npy"))
ARCHIVES["2.13 state_dict.pth"] = ("2.13", os.path.join(T2, "state_dict.pth"), None, None)

COMMANDS = ["inspect", "verify", "extra", "stamp", "stamp-keep", "run", "trace", "convert"]

NEWER = "written by a newer PyTorch"
LITE = "a lite-interpreter archive holds bytecode"
SDPA_113 = "uses aten::scaled_dot_product_attention, which libtorch 1.13 lacks"
TORCH_SAVE = "torch.save file"

# (archive, command) -> (exit, text in the error line), by libtorch major;
# every cell not listed must work.
EXPECTED = {1: {}, 2: {}}
for major in (1, 2):
    e = EXPECTED[major]
    for future in ("format11_mlp.pt", "bytecode10_mlp.ptl"):
        for cmd in ("verify", "run", "trace", "convert"):
            e[(future, cmd)] = (3, NEWER)
    for lite in ("mlp.ptl", "bytecode10_mlp.ptl", "2.13 mlp.ptl"):
        for cmd in ("trace", "convert"):
            e.setdefault((lite, cmd), (3, LITE))
    # verify takes a torch.save file: its check is what loading it would run.
    for cmd in ("extra", "stamp", "stamp-keep", "run", "trace", "convert"):
        e[("2.13 state_dict.pth", cmd)] = (3, TORCH_SAVE)
for cmd in ("run", "trace", "convert"):
    EXPECTED[1][("2.13 sdpa.pt", cmd)] = (5, SDPA_113)


def tsarchive(*args):
    return subprocess.run([TSARCHIVE, *args], capture_output=True, text=True, env=ENV, timeout=600)


def one_line(p):
    lines = p.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("tsarchive: error: ")]
    return errors[0] if len(errors) == 1 and lines[-1] == errors[0] else None


# Dynamically quantized Linear depends on the quantized engine: the wheel's
# libtorch defaults to fbgemm (reduce_range: 7-bit activations), Debian's has
# only qnnpack (which ignores reduce_range), and the goldens were made with
# qnnpack; the engines differ by up to ~0.006 here.
TOLERANCE = {"quant_dynamic_out.npy": "2e-2"}


def run_golden(path, inp, out):
    atol = TOLERANCE.get(os.path.basename(out), "1e-4")
    return tsarchive("run", path, "--input", "@" + inp, "--expect", "@" + out, "--atol", atol, "--rtol", "1e-4")


def cell(name, cmd, work):
    """Returns (exit status, error line or None, note)."""
    source, path, inp, out = ARCHIVES[name]
    copy = os.path.join(work, "copy" + os.path.splitext(path)[1])
    shutil.copyfile(path, copy)
    if cmd == "inspect":
        p = tsarchive("inspect", copy)
        return p.returncode, one_line(p), ""
    if cmd == "verify":
        p = tsarchive("verify", copy)
        check("DAMAGED" not in p.stdout and "damaged" not in p.stderr, f"{name}: verify calls it damaged: {p.stdout}{p.stderr}")
        return p.returncode, one_line(p), ""
    if cmd == "extra":
        p = tsarchive("extra", "set", copy, "matrix.txt=cell")
        if p.returncode != 0:
            return p.returncode, one_line(p), ""
        got = tsarchive("extra", "get", copy, "matrix.txt")
        check(got.stdout == "cell", f"{name}: extra get after set: {got.stdout!r}")
        p = tsarchive("extra", "rm", copy, "matrix.txt")
        if p.returncode == 0:
            with open(copy, "rb") as a, open(path, "rb") as b:
                check(a.read() == b.read(), f"{name}: extra set then rm is not the original, byte for byte")
        return p.returncode, one_line(p), ""
    if cmd in ("stamp", "stamp-keep"):
        args = ["stamp", "--no-git", "--no-host", "--json", copy] + (["--keep-bytes"] if cmd == "stamp-keep" else [])
        p = tsarchive(*args)
        if p.returncode != 0:
            return p.returncode, one_line(p), ""
        doc = json.loads(p.stdout)
        v = tsarchive("verify", copy)
        want_verify = 3 if source == "future" else 0
        check(v.returncode == want_verify, f"{name}: verify after {cmd}: exit {v.returncode}: {v.stdout}{v.stderr}")
        check("matches its stamp" in v.stdout or source == "future", f"{name}: verify after {cmd}: {v.stdout}")
        note = doc["method"]
        if doc["format_version"]["raised"]:
            note += ", format %s->%s (said)" % (doc["format_version"]["before"], doc["format_version"]["after"])
            check("raised the format version" in doc["format_version"]["note"], f"{name}: raised note")
        if doc["method"] == "keep-bytes" and cmd == "stamp" and not path.endswith(".ptl"):
            check(any("keep-bytes" in n for n in doc["notes"]), f"{name}: stamp fell back to keep-bytes without a note")
        if inp and source != "future" and tsarchive("verify", path).returncode == 0:
            r = run_golden(copy, inp, out)
            if r.returncode != 0 and (name, "run") not in EXPECTED[MAJOR]:
                check(False, f"{name}: the stamped copy does not run to the writer's outputs: {r.stderr}")
        return 0, None, note
    if cmd == "run":
        if inp is None:
            p = tsarchive("run", copy, "--input", "2x8")
        else:
            p = run_golden(copy, inp, out)
        return p.returncode, one_line(p), "matches the writer's outputs" if p.returncode == 0 else ""
    if cmd in ("trace", "convert"):
        result = os.path.join(work, "result.pt")
        if os.path.exists(result):
            os.remove(result)
        # A trace records forward only: the MLPs' exported scaled() is dropped on request.
        extra = ["--freeze"] if cmd == "convert" else ["--allow-drop"]
        p = tsarchive(cmd, copy, "--input", "@" + inp if inp else "2x8", "-o", result, *extra)
        if p.returncode != 0:
            check(not os.path.exists(result), f"{name}: failed {cmd} left {result}")
            return p.returncode, one_line(p), ""
        r = run_golden(result, inp, out)
        check(r.returncode == 0, f"{name}: the {cmd} result does not give the writer's outputs: {r.stderr}")
        return 0, None, "result matches the writer's outputs"
    raise AssertionError(cmd)


def check_pickle_protocols(work):
    """torch.save at every pickle protocol this Python writes (2 is torch's default;
    4 and 5 bring FRAME, MEMOIZE, SHORT_BINUNICODE and STACK_GLOBAL): inspect
    describes the tensors torch.load gives back, verify finds it safe
    to load. Protocol 4 once crashed inspect (a null dereference on STACK_GLOBAL)."""
    value = {"w": torch.arange(6.0).reshape(2, 3), "step": torch.zeros(4, dtype=torch.int64),
             "meta": {"names": ["a", "b"], "lr": 0.5}}
    seen = []
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        path = os.path.join(work, "protocol%d.pth" % protocol)
        torch.save(value, path, pickle_protocol=protocol)
        p = tsarchive("inspect", "--json", path)
        check(p.returncode == 0, f"torch.save protocol {protocol}: inspect exit {p.returncode}: {p.stderr}")
        if p.returncode != 0:
            continue
        doc = json.loads(p.stdout)
        check(doc["kind"] == "torch_save", f"torch.save protocol {protocol}: kind {doc['kind']}")
        # Our own file: the full unpickler (torch 2.6+ defaults to weights_only, whose
        # unpickler refuses protocol 4's FRAME opcode).
        loaded = torch.load(path, weights_only=False)
        want = {k: (str(t.dtype).replace("torch.", ""), list(t.shape)) for k, t in loaded.items() if torch.is_tensor(t)}
        got = {t["path"]: (t["dtype"], t["shape"]) for t in doc["tensors"]}
        check(got == want, f"torch.save protocol {protocol}: inspect says {got}, torch.load gives {want}")
        # verify takes a torch.save file and checks what loading it would run (docs/load-safety.md).
        v = tsarchive("verify", path)
        check(v.returncode == 0 and "safe to load" in v.stdout and TORCH_SAVE in v.stdout,
              f"torch.save protocol {protocol}: verify exit {v.returncode} {v.stdout!r} {v.stderr!r}")
        seen.append(protocol)
    return seen


def main():
    global MAJOR
    version = tsarchive("--version", "--verbose").stdout  # loads the torch layer
    if "built without the torch layer" in version:
        print("this tsarchive is built without the torch layer; skipping:\n" + version)
        sys.exit(77)
    m = re.search(r"^in use +libtorch (\d+)\.(\d+)", version, re.M)
    # A torch layer that is built but does not load is what this check exists to catch.
    if m is None:
        sys.exit("FAIL: the torch layer is built but libtorch did not load:\n" + version)
    MAJOR = int(m.group(1))
    print(f"tsarchive linked against libtorch {m.group(1)}.{m.group(2)}; Python torch {torch.__version__}")
    table = []
    with tempfile.TemporaryDirectory() as work:
        protocols = check_pickle_protocols(work)
        for name in ARCHIVES:
            row = []
            for cmd in COMMANDS:
                status, line, note = cell(name, cmd, work)
                want = EXPECTED[MAJOR].get((name, cmd))
                if want is None:
                    check(status == 0, f"{name} x {cmd}: exit {status}, wanted it to work: {line}")
                    row.append("ok" + (f" ({note})" if note else ""))
                else:
                    code, text = want
                    check(status == code and line is not None and text in line,
                          f"{name} x {cmd}: exit {status} {line!r}, wanted exit {code} with {text!r}")
                    check(line is None or "damaged" not in line, f"{name} x {cmd}: called damaged: {line}")
                    row.append(f"refused {status}: {line[len('tsarchive: error: '):] if line else '?'}")
            table.append((ARCHIVES[name][0], name, row))
    print()
    print("| source | archive | " + " | ".join(COMMANDS) + " |")
    print("|" + "---|" * (len(COMMANDS) + 2))
    for source, name, row in table:
        short = [re.sub(r" \(([^)]{60})[^)]*\)", r" (\1...)", c)[:110] for c in row]
        print(f"| {source} | {name} | " + " | ".join(short) + " |")
    print(f"torch.save at pickle protocols {protocols}: inspect matches torch.load, verify finds them safe to load")
    finish(f"ok: {len(ARCHIVES)} archives x {len(COMMANDS)} commands on libtorch {m.group(1)}.{m.group(2)}")


if __name__ == "__main__":
    main()
