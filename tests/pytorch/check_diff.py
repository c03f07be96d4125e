#!/usr/bin/python3
"""Real PyTorch agrees with `tsarchive diff` about tensors and code.

Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):

    /usr/bin/python3 tests/pytorch/check_diff.py TSARCHIVE TESTDATA_DIR

For each pair of archives it runs `tsarchive diff --json`, loads both with
torch.jit.load, and checks, for every parameter and buffer:
- a path tsarchive reports added or removed is missing from the other
  module, and every other path is in both;
- for tensors of one dtype and shape, the number of differing elements
  (a != b, NaN equal to NaN) and the max abs difference computed in float64
  equal what tsarchive reports, and tensors tsarchive does not list are
  torch.equal;
- dtype and shape changes are reported as such;
and that applying the unified diff of each code/ file to the old archive's
text gives the new archive's text. A file compared with itself exits 0.
"""

import json
import subprocess
import sys
import zipfile

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
failures = []

PAIRS = [
    ("mlp_scripted.pt", "mlp_scripted_v2.pt"),
    ("mlp_scripted_v2.pt", "mlp_scripted.pt"),
    ("dtypes.pt", "dtypes_v2.pt"),
    ("dtypes_v2.pt", "dtypes.pt"),
    ("mlp_scripted.pt", "mlp_scripted.pt"),
    ("quant_dynamic.pt", "quant_dynamic.pt"),
    ("convnet_traced.pt", "frozen.pt"),
]


def tensors(module):
    out = dict(module.named_parameters())
    out.update(dict(module.named_buffers()))
    return out


def differing(a, b):
    """(count of differing elements, max abs difference over finite ones or None)."""
    if a.dtype == torch.bool:
        a, b = a.to(torch.int64), b.to(torch.int64)
    if a.is_complex() or a.is_floating_point():
        both_nan = torch.isnan(a) & torch.isnan(b)
        diff = (a != b) & ~both_nan
    else:
        diff = a != b
    count = int(diff.sum())
    if count == 0:
        return 0, None
    if a.is_complex():
        delta = (a.to(torch.complex128) - b.to(torch.complex128)).abs()
    else:
        delta = (a.to(torch.float64) - b.to(torch.float64)).abs()
    finite = delta[diff & torch.isfinite(delta)]
    return count, (float(finite.max()) if finite.numel() else None)


def apply_unified(old, patch):
    """Applies a unified diff of one file (the subset tsarchive writes)."""
    old_lines = old.splitlines(keepends=True)
    out, at, previous = [], 0, " "
    for line in patch.splitlines(keepends=True)[2:]:
        if line.startswith("@@"):
            old_range = line.split()[1][1:]
            start, _, count = old_range.partition(",")
            first = int(start) if count == "0" else int(start) - 1
            out.extend(old_lines[at:first])
            at = first
        elif line.startswith("\\ No newline"):
            if previous != "-":
                out[-1] = out[-1][:-1]
        else:
            previous = line[0]
            if line[0] in " -":
                assert old_lines[at].rstrip("\n") == line[1:].rstrip("\n"), (old_lines[at], line)
                at += 1
            if line[0] in " +":
                out.append(line[1:])
    out.extend(old_lines[at:])
    return "".join(out)


def code_text(path, record):
    with zipfile.ZipFile(path) as zf:
        top = zf.namelist()[0].split("/", 1)[0]
        name = top + "/" + record
        return zf.read(name).decode() if name in zf.namelist() else ""


def check(old_name, new_name):
    old_path, new_path = f"{TESTDATA}/{old_name}", f"{TESTDATA}/{new_name}"
    result = subprocess.run([TSARCHIVE, "diff", "--json", old_path, new_path], capture_output=True)
    problems = []
    if result.returncode not in (0, 1):
        raise AssertionError(f"tsarchive diff failed: {result.stderr.decode()}")
    doc = json.loads(result.stdout)
    if (result.returncode == 0) != doc["same"] or (old_name == new_name and result.returncode != 0):
        problems.append(f"exit status {result.returncode} with same={doc['same']}")
    reported = {t["path"]: t for t in doc["tensors"]}
    a, b = tensors(torch.jit.load(old_path)), tensors(torch.jit.load(new_path))
    for path in a.keys() | b.keys():
        r = reported.get(path)
        if path not in b or path not in a:
            want = "removed" if path not in b else "added"
            if not r or r["change"] != want:
                problems.append(f"{path}: torch says {want}, tsarchive says {r and r['change']}")
            continue
        x, y = a[path], b[path]
        if x.dtype != y.dtype or x.shape != y.shape:
            if not r or not ({"dtype", "shape"} & set(r["changes"])):
                problems.append(f"{path}: dtype/shape change not reported")
            continue
        if x.is_quantized:
            x, y = x.int_repr(), y.int_repr()
        count, max_diff = differing(x, y)
        if r is None or "values" not in r:
            if count:
                problems.append(f"{path}: torch finds {count} differing elements, tsarchive none")
            continue
        got = r["values"]
        if got["differing"] != count:
            problems.append(f"{path}: differing {got['differing']}, torch {count}")
        if not x.is_quantized and got["max_abs_diff"] != max_diff:
            problems.append(f"{path}: max abs diff {got['max_abs_diff']}, torch {max_diff}")
    for code in doc["code"]:
        old_text, new_text = code_text(old_path, code["record"]), code_text(new_path, code["record"])
        if not code["computed"] or apply_unified(old_text, code["diff"]) != new_text:
            problems.append(f"{code['record']}: the unified diff does not turn old into new")
    label = f"{old_name} -> {new_name}"
    checked = len(a.keys() | b.keys())
    print(f"{label:45s} {'ok' if not problems else 'FAILED: ' + '; '.join(problems)} ({checked} tensors)")
    if problems:
        failures.append(label)


for old_name, new_name in PAIRS:
    check(old_name, new_name)

if failures:
    print(f"{len(failures)} pair(s) disagree: {failures}")
    sys.exit(1)
print("PyTorch agrees with tsarchive diff on every pair")
