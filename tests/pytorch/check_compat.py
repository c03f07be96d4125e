#!/usr/bin/python3
"""Archives written by other projects and other PyTorch releases,
made at test time by real PyTorch and read by tsarchive:

- traced_inputs: a module traced by PyTorch 2.x keeps its example inputs
  (traced_inputs.pkl, traced_inputs/N) for torch.jit.load(_restore_shapes=True).
  inspect names their kind; `stamp` keeps them (a libtorch re-save would drop
  them) with a note, both as 2.13 writes them and as 2.0 did (without
  byteorder and .data/serialization_id), and PyTorch still restores the shapes.
- a legacy torch.export.save file (records at the ZIP root) gets a load-safety
  verdict (inspect, verify: 2.13's torch.export.load still reads the layout
  through a fallback to zipfile), and the other commands refuse it as what it is.
- inspect --graph of a .ptl gives torch.jit.load(x.ptl).graph when the archive
  has code/ (_save_for_lite_interpreter keeps it); a bytecode-only .ptl, which
  the lite interpreter still loads, is refused.
- a torch.save-style archive whose pickle names __torch__ classes, with no
  code/: inspect says neither torch.load nor torch.jit.load reads it (each
  PyTorch fails on it, checked).
- stamp and verify give the same record count for the same file.
- run --input json:{...} on a Dict[str, float] keeps the object's key order.

Run by CTest with TSARCHIVE_PYTHON; exit 77 (skipped) when no python with
torch is found. Archives from another PyTorch come from another python: torch
1.x from /usr/bin/python3 (Debian's), torch 2.x from TSARCHIVE_TORCH2_PYTHON,
else SOURCE_DIR/.venv/bin/python (scripts/dev.sh torch2); a check that needs
one that is missing says so and is skipped:

    python3 tests/pytorch/check_compat.py TSARCHIVE SOURCE_DIR
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish, tsarchive  # noqa: E402

TSARCHIVE, SOURCE = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ENV_EPOCH = "1700000000"


def torch_major(python):
    p = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return int(p.stdout.split(".")[0]) if p.returncode == 0 else None


# torch major version -> a python that has it
PYTHONS = {}
for candidate in (sys.executable, os.environ.get("TSARCHIVE_TORCH2_PYTHON"), os.path.join(SOURCE, ".venv/bin/python"),
                  "/usr/bin/python3"):
    if candidate and os.path.exists(candidate):
        major = torch_major(candidate)
        if major is not None:
            PYTHONS.setdefault(major, candidate)
if not PYTHONS:
    print("no python with torch found; skipping")
    sys.exit(77)
print("pythons:", ", ".join(f"torch {m}.x: {p}" for m, p in sorted(PYTHONS.items())))


def py(major, code, *args):
    """Runs `code` under the python with torch `major`.x; its stdout and stderr.
    From a file: torch.jit.script compiles from the source it reads back."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    try:
        p = subprocess.run([PYTHONS[major], f.name, *args], capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(f.name)
    if p.returncode != 0:
        raise RuntimeError(f"torch {major}.x: {code[:60]!r}...: {p.stderr[-2000:]}")
    return p


def any_torch():
    return max(PYTHONS)


# Copies archive SRC to DST through this torch's PyTorchFileWriter (64-byte
# aligned, as torch.jit.save writes), leaving out the records named in DROP
# (comma-separated; a name ending in / drops the folder). The writer writes
# `version` itself; a 1.x writer adds no byteorder or .data/serialization_id.
REWRITE = r"""
import sys, zipfile, torch
src, dst = sys.argv[1], sys.argv[2]
drop = [d for d in sys.argv[3].split(",") if d]
z = zipfile.ZipFile(src)
top = z.namelist()[0].split("/")[0] + "/"
w = torch._C.PyTorchFileWriter(dst)
version = 1
for info in z.infolist():
    rel = info.filename[len(top):]
    if rel in ("version", ".data/version"):
        version = int(z.read(info))
        continue
    if rel in ("byteorder", ".data/serialization_id"):
        continue
    if any(rel == d or (d.endswith("/") and rel.startswith(d)) for d in drop):
        continue
    data = z.read(info)
    w.write_record(rel, data, len(data))
w.set_min_version(version)
w.write_end_of_file()
"""

TRACE = r"""
import sys, torch
class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
    def forward(self, x):
        return self.fc(x)
torch.manual_seed(0)
torch.jit.save(torch.jit.trace(Affine(), torch.randn(1, 3)), sys.argv[1])
"""

# Loads with _restore_shapes=True: prints the input's restored sizes (None
# without traced inputs, when libtorch also warns on stderr "Cannot restore
# shapes as no traced inputs were stored").
RESTORE = r"""
import json, sys, torch
m = torch.jit.load(sys.argv[1], _restore_shapes=True)
print(json.dumps({"sizes": list(m.graph.inputs())[1].type().sizes()}))
"""


def record_names(path):
    p = tsarchive(TSARCHIVE, "inspect", "--json", path)
    return {r["name"]: r["kind"] for r in json.loads(p.stdout)["archive"]["records"]} if p.returncode == 0 else {}


def stamp(path, *extra):
    env = dict(os.environ, SOURCE_DATE_EPOCH=ENV_EPOCH)
    return subprocess.run([TSARCHIVE, "stamp", "--no-git", "--no-host", *extra, path], capture_output=True, text=True,
                          env=env, timeout=600)


def check_traced_inputs(work):
    if 2 not in PYTHONS:
        print("SKIP traced_inputs: no python with torch 2.x (set TSARCHIVE_TORCH2_PYTHON)")
        return
    traced = os.path.join(work, "traced2.pt")
    py(2, TRACE, traced)
    cases = {"as 2.x writes it": traced}
    if 1 in PYTHONS:
        # PyTorch 2.0 wrote traced_inputs before it wrote byteorder or
        # .data/serialization_id, the records that mark a 2.x archive.
        cases["as 2.0 wrote it"] = os.path.join(work, "traced20.pt")
        py(1, REWRITE, traced, cases["as 2.0 wrote it"], "")
    else:
        print("SKIP traced_inputs as 2.0 wrote it: no python with torch 1.x")
    for what, path in cases.items():
        before = record_names(path)
        traced_records = sorted(n for n in before if n.startswith("traced_inputs"))
        check(traced_records == ["traced_inputs.pkl", "traced_inputs/0"], f"{what}: records {sorted(before)}")
        check(all(before[n] == "traced_inputs" for n in traced_records),
              f"{what}: inspect labels the traced inputs {[before[n] for n in traced_records]}, not traced_inputs")
        s = stamp(path)
        check(s.returncode == 0, f"{what}: stamp: exit {s.returncode}: {s.stderr}")
        after = record_names(path)
        lost = sorted(set(before) - set(after))
        check(not lost, f"{what}: stamp dropped {lost}")
        check("traced_inputs" in s.stderr and "keep-bytes" in s.stderr,
              f"{what}: stamp does not say why it kept the bytes: {s.stderr!r}")
        v = tsarchive(TSARCHIVE, "verify", path)
        check("intact" in v.stdout, f"{what}: verify after stamp: {v.stdout}")
        restored = py(2, RESTORE, path)
        check(json.loads(restored.stdout)["sizes"] == [1, 3] and "Cannot restore shapes" not in restored.stderr,
              f"{what}: torch.jit.load(_restore_shapes=True) after stamp: {restored.stdout} {restored.stderr}")



def check_legacy_export(work):
    # torch.export.save before the PT2 archive format: a plain zipfile with its
    # records at the root (the layout of torch/_export/__init__.py's save()).
    path = os.path.join(work, "legacy_export.pt2")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("serialized_exported_program.json", json.dumps({"schema_version": 2, "graph_module": {}}))
        z.writestr("serialized_state_dict.pt", b"")
        z.writestr("serialized_constants.pt", b"")
        z.writestr("version", "2")
    for args in (["inspect", path], ["verify", path]):
        p = tsarchive(TSARCHIVE, *args, want=0)
        check("layout before PyTorch 2.6" in p.stdout and "torch.export.load" in p.stdout,
              f"legacy torch.export file: {args[0]}: {p.stdout!r}")
    p = tsarchive(TSARCHIVE, "stamp", path, want=3)
    check("torch.export file in the legacy layout" in p.stderr and "schema version 2" in p.stderr and
          "torch.export.save" in p.stderr, f"legacy torch.export file: stamp: {p.stderr!r}")


LITE = r"""
import json, sys, torch
class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
    def forward(self, x):
        return torch.relu(self.fc(x)) * 2.0
torch.manual_seed(0)
torch.jit.script(Scale())._save_for_lite_interpreter(sys.argv[1])
print(json.dumps({"graph": str(torch.jit.load(sys.argv[1]).graph)}))
"""

MOBILE = r"""
import sys, torch
from torch.jit.mobile import _load_for_lite_interpreter
print(_load_for_lite_interpreter(sys.argv[1])(torch.ones(1, 3)).shape)
"""


def check_lite_graph(work):
    # _save_for_lite_interpreter keeps code/ beside the bytecode, so
    # torch.jit.load(x.ptl).graph works, and so does inspect --graph.
    major = any_torch()
    ptl = os.path.join(work, "scale.ptl")
    want = json.loads(py(major, LITE, ptl).stdout)["graph"]
    p = tsarchive(TSARCHIVE, "inspect", "--graph", ptl)
    check(p.returncode == 0 and p.stdout.strip() == want.strip(),
          f"inspect --graph of a .ptl with code/: {p.stdout!r}, torch.jit.load(...).graph: {want!r}")
    # Without code/ (bytecode only, still loaded by the lite interpreter) there is no graph to give.
    bytecode_only = os.path.join(work, "bytecode_only.ptl")
    py(major, REWRITE, ptl, bytecode_only, "code/")
    py(major, MOBILE, bytecode_only)
    p = tsarchive(TSARCHIVE, "inspect", "--graph", bytecode_only, want=2)
    check("holds bytecode, not graphs" in p.stderr, f"inspect --graph of a bytecode-only .ptl: {p.stderr!r}")


LOADERS = r"""
import json, sys, torch
out = {}
for name, load in (("torch.load", lambda p: torch.load(p, weights_only=False) if torch.__version__ >= "2" else torch.load(p)),
                   ("torch.jit.load", torch.jit.load)):
    try:
        load(sys.argv[1])
        out[name] = "ok"
    except Exception as e:
        out[name] = f"{type(e).__name__}: {e}"[:200]
print(json.dumps(out))
"""


def check_torchscript_pickle_without_code(work):
    # data.pkl of a TorchScript module without code/ and constants.pkl: the
    # layout of torch.save, but its pickle names __torch__ classes, which only
    # torch.jit.load defines, from code/. Neither loader reads it.
    for major in sorted(PYTHONS):
        saved = os.path.join(work, f"scripted{major}.pt")
        stripped = os.path.join(work, f"no_code{major}.pt")
        py(major, TRACE, saved)
        py(major, REWRITE, saved, stripped, "code/,constants.pkl,traced_inputs/,traced_inputs.pkl")
        loaders = json.loads(py(major, LOADERS, stripped).stdout)
        check(all(v != "ok" for v in loaders.values()), f"torch {major}.x reads the stripped archive: {loaders}")
        p = tsarchive(TSARCHIVE, "inspect", "--json", stripped)
        notes = json.loads(p.stdout)["notes"] if p.returncode == 0 else []
        check(any("neither torch.load nor torch.jit.load reads it" in n and "__torch__.Affine" in n for n in notes),
              f"torch {major}.x: inspect's note on a __torch__ pickle without code/: {notes}")
        check(not any("load it with torch.load" in n for n in notes), f"torch {major}.x: inspect still says torch.load: {notes}")


KEYS = r"""
import sys, torch
from typing import Dict
class Keys(torch.nn.Module):
    def forward(self, d: Dict[str, float]) -> str:
        return " ".join(list(d.keys()))
m = torch.jit.script(Keys())
m.save(sys.argv[1])
print(m({"b": 1.0, "a": 2.0}))
"""

VALUES = r"""
import sys, torch
from typing import Dict
class Values(torch.nn.Module):
    def forward(self, d: Dict[str, float]) -> torch.Tensor:
        return torch.tensor(list(d.values()))
torch.jit.script(Values()).save(sys.argv[1])
"""


def check_dict_order(work):
    # A JSON object becomes a TorchScript dict in the object's order, as
    # Python's json.loads and a dict literal give it.
    path = os.path.join(work, "keys.pt")
    want = py(any_torch(), KEYS, path).stdout.strip()
    check(want == "b a", f"PyTorch joins the keys as {want!r}")
    p = tsarchive(TSARCHIVE, "run", path, "--input", 'json:{"b": 1.0, "a": 2.0}', "--json")
    outputs = json.loads(p.stdout)["outputs"] if p.returncode == 0 else []
    check(len(outputs) == 1 and outputs[0].get("value") == want, f"run on a Dict[str, float]: {outputs}, PyTorch: {want!r}")
    # serve's "parameters" too, with the keys in an order neither sorted nor
    # reversed (the values come back as a tensor in the dict's order).
    values = os.path.join(work, "values.pt")
    py(any_torch(), VALUES, values)
    server = subprocess.Popen([TSARCHIVE, "serve", values, "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        check(line.startswith("tsarchive serve: http://"), f"serve's start line: {line!r}")
        url = line.split()[2] + "/models/values/infer"
        body = json.dumps({"inputs": [], "parameters": {"d": {"m": 1.0, "z": 2.0, "a": 3.0}}}).encode()
        request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            answer = json.loads(r.read())
        data = [o.get("data") for o in answer.get("outputs", [])]
        check(data == [[1.0, 2.0, 3.0]], f"serve on a Dict[str, float] in the request's parameters: {answer}")
    except (OSError, ValueError) as e:
        check(False, f"serve on a Dict[str, float]: {e}")
    finally:
        server.terminate()
        server.wait(timeout=60)


def check_record_counts(work):
    # stamp and verify count the records of the same file alike (the stamp
    # itself included).
    path = os.path.join(work, "counted.pt")
    py(any_torch(), TRACE, path)
    for extra in ((), ("--keep-bytes",)):
        s = stamp(path, *extra)
        v = tsarchive(TSARCHIVE, "verify", path)
        stamped = re.search(r": (\d+) records", s.stdout)
        verified = re.search(r"records\s+(\d+),", v.stdout)
        check(stamped and verified and stamped.group(1) == verified.group(1),
              f"stamp {' '.join(extra)} says {s.stdout!r}, verify {v.stdout!r}")


with tempfile.TemporaryDirectory() as work:
    check_traced_inputs(work)
    check_legacy_export(work)
    check_lite_graph(work)
    check_torchscript_pickle_without_code(work)
    check_record_counts(work)
    check_dict_order(work)

finish("ok: archives from other PyTorch releases and projects")
