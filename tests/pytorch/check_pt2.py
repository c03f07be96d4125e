#!/usr/bin/python3
"""Real PyTorch agrees with `tsarchive inspect --json` about .pt2 archives.

Run by CTest with TSARCHIVE_PYTHON (exit 77, skipped, when it has no
torch.export: Debian's torch 1.13 has none; the venv of `scripts/dev.sh torch2`
has torch 2.13):

    .venv/bin/python tests/pytorch/check_pt2.py TSARCHIVE TESTDATA_DIR

For each torch.export archive in testdata/pt2/ it loads the program with
torch.export.load and checks that inspect reports the same user inputs and
outputs (names, dtypes, shapes with symbols), the same parameters, buffers
(persistent or not) and constants with their dtypes, shapes and bytes, the
same range constraints and the extra files with their bytes. For each
AOTInductor package it checks the device and metadata against
aoti_load_package(...).loader.get_metadata() (this loads the package's
compiled code, which tsarchive itself never does in inspect).
Without Python, tests/unit/test_pt2.cc checks the same facts from
testdata/pt2/expected.json.
"""

import json
import re
import os
import subprocess
import sys

try:
    import torch
    import torch.export  # noqa: F401
    from torch.export import load as export_load
except ImportError:
    print("torch.export is not available for this python; skipping")
    sys.exit(77)

from harness import check, finish

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
PT2 = os.path.join(TESTDATA, "pt2")


def dtype_id(dtype):
    return str(dtype).replace("torch.", "")


def shape_of(t):
    # tsarchive shows a symbol by its name ("s77"); str() of a SymInt is the same.
    return [int(d) if isinstance(d, int) else str(d) for d in t.shape]


def same_shape(shown, t):
    """A compound size is shown as str() of the SymInt shows it (s77//2 + 1),
    but for the doubled parentheses sympy puts around a FloorDiv in a sum
    ("((s77//2)) + 1"): equal without parentheses and spaces."""
    want = shape_of(t)
    if len(shown) != len(want):
        return False
    bare = lambda text: re.sub(r"[() ]", "", str(text))
    return all(a == b if isinstance(b, int) else bare(a) == bare(b) for a, b in zip(shown, want))


def inspect(path):
    done = subprocess.run([TSARCHIVE, "inspect", "--json", path], capture_output=True, text=True)
    if done.returncode != 0:
        check(False, f"{path}: inspect exited {done.returncode}: {done.stderr.strip()}")
        return None
    return json.loads(done.stdout)


def check_program(name, doc, ep, extra):
    done = subprocess.run([TSARCHIVE, "inspect", "--ops", "--json", os.path.join(PT2, name)],
                          capture_output=True, text=True)
    ops = json.loads(done.stdout)["operators"] if done.returncode == 0 else done.stderr
    check(ops == sorted({n.target.name() for n in ep.graph.nodes
                         if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)}),
          f"{name}: inspect --ops {ops}")
    program = doc["pt2"]["programs"][0]
    sig = ep.graph_signature
    placeholders = {n.name: n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"}
    outputs = {n.name: n.meta.get("val") for n in ep.graph.nodes if n.op == "output" for n in n.args[0]}
    user_inputs = [a for a in program["inputs"] if a["kind"] == "user_input"]
    check([a["name"] for a in user_inputs] == list(sig.user_inputs), f"{name}: user inputs")
    for a in user_inputs:
        val = placeholders[a["name"]]
        check(a["tensor"]["dtype"] == dtype_id(val.dtype), f"{name}: dtype of input {a['name']}")
        check(same_shape(a["tensor"]["shape"], val), f"{name}: shape of input {a['name']}: {a['tensor']['shape']}")
    user_outputs = [a for a in program["outputs"] if a["kind"] == "user_output"]
    check([a["name"] for a in user_outputs] == list(sig.user_outputs), f"{name}: user outputs")
    for a in user_outputs:
        val = outputs[a["name"]]
        check(same_shape(a["tensor"]["shape"], val), f"{name}: shape of output {a['name']}: {a['tensor']['shape']}")
    payloads = {p["name"]: p for p in program["weights"] + program["constants"]}
    tensors = dict(ep.state_dict)
    tensors.update({k: v for k, v in ep.constants.items() if isinstance(v, torch.Tensor)})
    check(set(payloads) == set(tensors), f"{name}: payload names {sorted(payloads)} vs {sorted(tensors)}")
    for key, t in tensors.items():
        p = payloads.get(key)
        if p is None:
            continue
        check(p["tensor"]["dtype"] == dtype_id(t.dtype), f"{name}: dtype of {key}")
        check(p["tensor"]["shape"] == list(t.shape), f"{name}: shape of {key}")
        check(p["tensor"]["nbytes"] == t.numel() * t.element_size(), f"{name}: bytes of {key}")
        check(p["is_param"] == (key in sig.parameters), f"{name}: is_param of {key}")
        check(p["present"] and p["stored"] and p["aligned"], f"{name}: record of {key} not stored/aligned")
    persistent = {a["target"]: a.get("persistent") for a in program["inputs"] if a["kind"] == "buffer"}
    check(set(persistent) == set(sig.buffers), f"{name}: buffers")
    check({k for k, v in persistent.items() if v is False} == set(sig.non_persistent_buffers),
          f"{name}: non-persistent buffers")
    ranges = {r["symbol"]: [r["min"], r["max"]] for r in program["range_constraints"]}
    bound = lambda b: None if str(b) in ('int_oo', 'oo') else int(b)  # tsarchive: no bound
    check(ranges == {str(k): [bound(v.lower), bound(v.upper)] for k, v in ep.range_constraints.items()},
          f"{name}: range constraints {ranges}")
    listed = {e["name"] for e in doc["extra_files"]}
    check(listed == set(extra), f"{name}: extra files {sorted(listed)} vs {sorted(extra)}")
    for key, text in extra.items():
        got = subprocess.run([TSARCHIVE, "inspect", os.path.join(PT2, name), "--extra", key],
                             capture_output=True).stdout
        check(json.loads(got) == json.loads(text) if key.endswith(".json") else got.decode() == text,
              f"{name}: extra file {key}")


def main():
    names = sorted(n for n in os.listdir(PT2) if n.endswith(".pt2"))
    check(len(names) >= 4, f"testdata/pt2 holds {names}")
    for name in names:
        path = os.path.join(PT2, name)
        doc = inspect(path)
        if doc is None:
            continue
        check(doc["kind"] == "exported_program", f"{name}: kind {doc['kind']}")
        check(doc["problems"] == [], f"{name}: problems {doc['problems']}")
        if doc["pt2"]["aotinductor"]:
            from torch._inductor import aoti_load_package

            metadata = dict(aoti_load_package(path).loader.get_metadata())
            model = doc["pt2"]["aotinductor"][0]
            check(model["device"] == metadata["AOTI_DEVICE_KEY"], f"{name}: device")
            check(model["metadata"] == metadata, f"{name}: metadata {model['metadata']} vs {metadata}")
            continue
        names_in_archive = {e["name"] for e in doc["extra_files"]}
        extra = {k: "" for k in names_in_archive}
        ep = export_load(path, extra_files=extra)
        check_program(name, doc, ep, extra)
    finish(f"{len(names)} .pt2 archives, no failures")


if __name__ == "__main__":
    main()
