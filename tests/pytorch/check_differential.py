#!/usr/bin/python3
"""What tsarchive vouches for must be what PyTorch loads.

    check_differential.py TSARCHIVE TESTDATA

For every file in TESTDATA/hostile/ and every real archive elsewhere in
TESTDATA/ it asks tsarchive's gate, `verify --json` (the checks `run`, `stamp`,
`trace` and `convert` make before libtorch sees a file: src/operations/gate.cc passes
a file when `problems` is empty, i.e. verify exits 0 or 1). For each file the
gate passes, two other readers must see exactly the records tsarchive
describes, byte for byte (SHA-256 of every record, from verify's digests):
- Python's zipfile: same record names (under the top folder), same content;
- Debian's PyTorch (/usr/bin/python3 with torch), in a child process:
  torch._C.PyTorchFileReader's get_all_records/get_record (the reader
  torch.jit.load uses: data.pkl, code/, constants, tensors, extra/), and
  torch.jit.load's _extra_files for every extra/ record.
Any disagreement fails the test: such a file must be refused by tsarchive.
Without torch the zipfile half still runs and the test exits 77 (skipped) at
the end only if torch is missing, so a zipfile disagreement still fails.
"""

import hashlib
import json
import os
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish  # noqa: E402

# The PyTorch half: one child for all files (torch is imported once); a line
# of JSON per file: every record's SHA-256 as PyTorchFileReader reads it, and
# the extra files torch.jit.load hands back.
TORCH_PROBE = r"""
import hashlib, json, sys
import torch
for line in sys.stdin:
    job = json.loads(line)
    out = {"path": job["path"]}
    try:
        reader = torch._C.PyTorchFileReader(job["path"])
        out["records"] = {n: hashlib.sha256(reader.get_record(n)).hexdigest() for n in reader.get_all_records()}
        extra = {name: "" for name in job["extra"]}
        torch.jit.load(job["path"], map_location="cpu", _extra_files=extra)
        out["extra"] = {k: hashlib.sha256(v if isinstance(v, bytes) else v.encode()).hexdigest()
                        for k, v in extra.items()}
    except Exception as e:  # reported, compared by the parent
        out["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
    print(json.dumps(out), flush=True)
"""


def candidates(testdata):
    files = []
    for folder, dirs, names in os.walk(testdata):
        dirs[:] = [d for d in dirs if d != "fuzz-crashes"]
        hostile = os.path.basename(folder) == "hostile"
        for name in sorted(names):
            path = os.path.join(folder, name)
            if hostile or name.endswith((".pt", ".ptl", ".pth", ".zip")):
                files.append(path)
    return sorted(files)


def gate(binary, path):
    """verify's records when the gate passes the file, else None."""
    p = subprocess.run([binary, "verify", "--json", "--threads", "1", path], capture_output=True, text=True,
                       timeout=120)
    if p.returncode not in (0, 1):
        return None
    report = json.loads(p.stdout)
    # torch.save files and pickles get the load-safety verdict alone: no records to compare.
    if report.get("problems") or report.get("schema") != "tsarchive.verify/1":
        return None
    return report


def check_zipfile(path, report):
    top = report["top_folder"]
    ours = {top + "/" + r["name"]: r["sha256"] for r in report["records"]}
    try:
        with zipfile.ZipFile(path) as z:
            names = [i.filename for i in z.infolist() if not i.is_dir()]
            check(len(names) == len(set(names)), f"{path}: Python's zipfile sees duplicate names")
            check(set(names) == set(ours), f"{path}: Python's zipfile sees other records: "
                  f"{sorted(set(names) ^ set(ours))[:5]}")
            for name in set(names) & set(ours):
                got = hashlib.sha256(z.read(name)).hexdigest()
                check(got == ours[name], f"{path}: Python's zipfile reads other bytes for {name}")
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as e:
        check(False, f"{path}: tsarchive's gate passes it, Python's zipfile refuses it: {e}")


def check_torch(probed, accepted):
    for path, report in accepted:
        got = probed.get(path)
        if got is None:
            check(False, f"{path}: the PyTorch probe stopped before it (crashed?)")
            continue
        ours = {r["name"]: r["sha256"] for r in report["records"]}
        if "records" not in got:
            check(False, f"{path}: tsarchive's gate passes it, PyTorchFileReader fails: {got.get('error')}")
            continue
        theirs = got["records"]
        check(set(theirs) == set(ours), f"{path}: PyTorch sees other records: {sorted(set(theirs) ^ set(ours))[:5]}")
        for name in set(theirs) & set(ours):
            check(theirs[name] == ours[name], f"{path}: PyTorch reads other bytes for {name}")
        if report.get("kind") == "torchscript" and "extra" in got:
            for name, sha in got["extra"].items():
                check(sha == ours.get("extra/" + name), f"{path}: torch.jit.load hands back another extra/{name}")
        elif "error" in got:
            print(f"note: {os.path.relpath(path)}: torch.jit.load: {got['error']}")


def main():
    binary, testdata = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    accepted, refused = [], 0
    for path in candidates(testdata):
        report = gate(binary, path)
        if report is None:
            refused += 1
            continue
        accepted.append((path, report))
        check_zipfile(path, report)
    hostile_accepted = [os.path.basename(p) for p, _ in accepted if os.sep + "hostile" + os.sep in p]
    print(f"gate: {len(accepted)} files pass ({len(hostile_accepted)} hostile: {', '.join(hostile_accepted)}), "
          f"{refused} refused")

    has_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0
    if has_torch:
        jobs = "".join(json.dumps({"path": p, "extra": [r["name"][len("extra/"):] for r in rep["records"]
                                                        if r["name"].startswith("extra/")]}) + "\n"
                       for p, rep in accepted)
        p = subprocess.run(["/usr/bin/python3", "-c", TORCH_PROBE], input=jobs, capture_output=True, text=True,
                           timeout=1800)
        probed = {}
        for line in p.stdout.splitlines():
            got = json.loads(line)
            probed[got["path"]] = got
        if p.returncode != 0:
            print(f"the PyTorch probe exited {p.returncode}: {p.stderr.strip()[-500:]}")
        check_torch(probed, accepted)
    finish(f"differential: {len(accepted)} files the gate passes read the same in tsarchive, Python's zipfile"
           + (" and PyTorch" if has_torch else " (PyTorch missing: its half skipped)"))
    if not has_torch:
        sys.exit(77)


if __name__ == "__main__":
    main()
