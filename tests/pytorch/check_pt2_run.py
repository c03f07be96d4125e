#!/usr/bin/python3
"""`tsarchive run` on AOTInductor packages (.pt2) agrees with Python's
torch._inductor.aoti_load_package(path)(*inputs) on the same inputs.

Run by CTest with TSARCHIVE_PYTHON (exit 77, skipped, when that python has no
AOTInductor, e.g. Debian's torch 1.13, or when tsarchive is built against
libtorch 1.x, which cannot run a .pt2: tests/torch/pt2_run.sh checks that
refusal):

    .venv/bin/python tests/pytorch/check_pt2_run.py TSARCHIVE TESTDATA_DIR

For each package of testdata/pt2/ and testdata/pt2/run/: inputs from a
torch.save file and generated ones (--seed, drawn like torch.randn), outputs
written by --save-outputs and compared with PyTorch's; --sample-inputs (the
package's data/sample_inputs/, args and kwargs) against aoti_load_package on
the same sample; --expect passing and failing; --record on a copy (every
record PyTorch wrote kept byte for byte and aligned; load_pt2,
aoti_load_package and, for a package holding a program, torch.export.load
still load it, and the recorded base64 decodes to the inputs and PyTorch's
outputs), then --check passing, and failing once the recorded outputs are
tampered with; timing; the refusals (a program without compiled artifacts,
another device, no sample inputs); and copies of a package edited to claim
CUDA kernels for compute capability 1.0 or a program exported by a newer
PyTorch, each refused in one line before libtorch loads the package's code,
by what the build reports (no CUDA in it, no device visible, or a device of
another family): never a crash. A package of testdata/ exported by a PyTorch
newer than the libtorch tsarchive is built against (a GPU machine's older
PyTorch) is checked as that refusal instead of being run.
"""

import base64
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish, tsarchive  # noqa: E402

try:
    import torch
    from torch._inductor import aoti_load_package
    from torch.export.pt2_archive._package import load_pt2
except ImportError:
    print("torch._inductor.aoti_load_package is not available for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
PT2 = os.path.join(TESTDATA, "pt2")
LIBTORCH = (0, 0)  # the (major, minor) tsarchive is built against; set in main()


def major_minor(version):
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def exported_by_newer(path):
    """The PyTorch version that exported the package's program when it is newer
    (major.minor) than the libtorch tsarchive is built against, else None: `run`
    refuses such a package in one line (exit 3) before libtorch loads its code,
    so a package this tree's PyTorch wrote is refused by an older libtorch
    (a GPU machine's own PyTorch, say)."""
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if re.search(r"/models/[^/]+\.json$", name):
                version = json.loads(z.read(name)).get("torch_version") or ""
                if major_minor(version) > LIBTORCH:
                    return version
    return None


def refused_as_newer(path, *args):
    version = exported_by_newer(path)
    if version is None:
        return False
    p = tsarchive(TSARCHIVE, "run", path, *args, want=3)
    check(f"exported by PyTorch {version}, newer than this libtorch" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          f"{os.path.basename(path)} exported by {version}: {p.stderr}")
    return True


def inputs_of(name):
    """The (args, kwargs) each package is called with in Python (shapes its
    program accepts); tsarchive takes the same tensors in order."""
    torch.manual_seed(7)
    if name.startswith("mlp_dynamic"):
        return (torch.randn(5, 4),), {}
    if name.startswith("buffers_consts"):
        return (torch.randn(2, 5), torch.rand(2, 5) > 0.5), {}
    if name.startswith("affine_sample"):
        return (torch.randn(6, 4),), {"bias": torch.randn(3)}
    raise AssertionError(name)


def as_list(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def same(ours, theirs, what):
    ours, theirs = as_list(ours), as_list(theirs)
    check(len(ours) == len(theirs), f"{what}: {len(ours)} outputs vs PyTorch's {len(theirs)}")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        ok = a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, atol=1e-6, rtol=1e-5)
        check(ok, f"{what}: output {i} differs from PyTorch's: {a} vs {b}")


def run_json(*args, want=0):
    p = tsarchive(TSARCHIVE, "run", *args, "--json", want=want)
    return json.loads(p.stdout) if p.returncode == want and want in (0, 1) and p.stdout else None


def check_package(path, tmp):
    name = os.path.basename(path)
    compiled = aoti_load_package(path)
    args, kwargs = inputs_of(name)
    inputs = args + tuple(kwargs.values())
    theirs = compiled(*args, **kwargs)

    # Inputs from a torch.save file of a tuple: one tensor per input, in order.
    in_file, out_file = os.path.join(tmp, "in.pt"), os.path.join(tmp, "out.pt")
    torch.save(inputs, in_file)
    if refused_as_newer(path, "--input", "@" + in_file):
        return
    doc = run_json(path, "--input", "@" + in_file, "--save-outputs", out_file)
    if doc is None:
        return
    same(torch.load(out_file), theirs, f"{name} --input @in.pt")
    check(doc["method"] == "model", f"{name}: method {doc['method']}")
    shapes = [o["shape"] for o in doc["outputs"] if o.get("type") == "Tensor"]
    check(shapes == [list(t.shape) for t in as_list(theirs)], f"{name}: output shapes {shapes}")

    # --expect with PyTorch's outputs passes; with one element moved, fails (exit 1).
    torch.save(theirs, os.path.join(tmp, "golden.pt"))
    tsarchive(TSARCHIVE, "run", path, "--input", "@" + in_file, "--expect", "@" + os.path.join(tmp, "golden.pt"))
    moved = [t.clone() for t in as_list(theirs)]
    moved[0].view(-1)[0] += 1.0
    torch.save(tuple(moved), os.path.join(tmp, "off.pt"))
    tsarchive(TSARCHIVE, "run", path, "--input", "@" + in_file, "--expect", "@" + os.path.join(tmp, "off.pt"), want=1)

    # Generated inputs: --seed draws what torch.manual_seed + torch.randn do.
    if name.startswith("mlp_dynamic"):
        torch.manual_seed(3)
        x = torch.randn(7, 4)
        run_json(path, "--input", "7x4", "--seed", "3", "--save-outputs", out_file)
        same(torch.load(out_file), compiled(x), f"{name} --input 7x4 --seed 3")

    # --record stores a check (base64 text: load_pt2 decodes extra/ as UTF-8) that
    # --check replays and Python still loads; the golden written beside it by
    # --save-inputs/--save-outputs replays too.
    check_record(path, in_file, args, kwargs, theirs, tmp)
    saved_in, saved_out = os.path.join(tmp, "saved_in.pt"), os.path.join(tmp, "saved_out.pt")
    tsarchive(TSARCHIVE, "run", path, "--input", "@" + in_file, "--save-inputs", saved_in, "--save-outputs", saved_out)
    tsarchive(TSARCHIVE, "run", path, "--input", "@" + saved_in, "--expect", "@" + saved_out)
    saved = torch.load(saved_in)
    same(aoti_load_package(path)(*saved[:len(args)], **dict(zip(kwargs, saved[len(args):]))), theirs,
         f"{name}: PyTorch on the saved inputs")

    # Timing: warm-up and timed calls of the compiled code.
    doc = run_json(path, "--input", "@" + in_file, "--iters", "5", "--warmup", "2")
    if doc is not None:
        timing = doc.get("timing") or {}
        check(timing.get("iterations") == 5 and timing.get("warmup") == 2, f"{name}: timing {timing}")


def zip_records(path):
    """Each record's name -> (its bytes, where its data starts modulo 64)."""
    out = {}
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for info in z.infolist():
            f.seek(info.header_offset + 26)
            name_len, extra_len = struct.unpack("<HH", f.read(4))
            out[info.filename] = (z.read(info), (info.header_offset + 30 + name_len + extra_len) % 64)
    return out


CHECK_FILES = ["tsarchive/check.json", "tsarchive/check_inputs.pt.b64", "tsarchive/check_outputs.pt.b64"]


def check_record(path, in_file, args, kwargs, theirs, tmp):
    name = os.path.basename(path)
    copy = os.path.join(tmp, "recorded.pt2")
    shutil.copyfile(path, copy)
    doc = run_json(copy, "--input", "@" + in_file, "--record")
    notes = " ".join(doc["notes"]) if doc else ""
    check("extra/tsarchive/check_inputs.pt.b64" in notes and "as base64 text" in notes, f"{name}: record note: {notes}")

    # Every record PyTorch wrote keeps its bytes (and its 64-byte alignment); the check's three files are added.
    before, after = zip_records(path), zip_records(copy)
    top = next(iter(before)).split("/")[0] + "/"
    added = sorted(set(after) - set(before))
    check(added == sorted(top + "extra/" + f for f in CHECK_FILES), f"{name}: records added: {added}")
    for record, (data, offset) in before.items():
        kept = after.get(record)
        check(kept is not None and kept[0] == data, f"{name}: {record} changed")
        check(kept is None or offset != 0 or kept[1] == 0, f"{name}: {record} is no longer 64-byte aligned")

    # Python loads it: load_pt2 (behind aoti_load_package and torch.export.load)
    # decodes every extra/ file as UTF-8, and the recorded torch.save files read
    # back from their base64: the inputs given, PyTorch's outputs.
    extra = load_pt2(copy).extra_files
    check(sorted(extra) == CHECK_FILES, f"{name}: load_pt2's extra files: {sorted(extra)}")
    check(json.loads(extra["tsarchive/check.json"]).get("encoding") == "base64", f"{name}: check.json encoding")
    recorded_in = torch.load(io.BytesIO(base64.b64decode(extra["tsarchive/check_inputs.pt.b64"], validate=True)))
    given = args + tuple(kwargs.values())
    check(len(recorded_in) == len(given) and all(torch.equal(a, b) for a, b in zip(recorded_in, given)),
          f"{name}: recorded inputs {recorded_in} vs {given}")
    recorded_out = torch.load(io.BytesIO(base64.b64decode(extra["tsarchive/check_outputs.pt.b64"], validate=True)))
    same(recorded_out, theirs, f"{name}: recorded outputs")
    same(aoti_load_package(copy)(*args, **kwargs), theirs, f"{name}: aoti_load_package of the recorded package")
    if any(r.startswith(top + "models/") for r in before):
        files = {"tsarchive/check.json": ""}  # filled in (an empty dict would be replaced: `extra_files or {}`)
        program = torch.export.load(copy, extra_files=files)
        check(sorted(files) == CHECK_FILES and files == extra, f"{name}: torch.export.load's extra files: {sorted(files)}")
        same(program.module()(*args, **kwargs), torch.export.load(path).module()(*args, **kwargs),
             f"{name}: torch.export.load of the recorded package")

    # --check replays it and passes; `verify` and `inspect` see it.
    doc = run_json(copy, "--check")
    check(doc is not None and doc["passed"] and doc["checks"] and all(c["passed"] for c in doc["checks"]),
          f"{name}: --check: {doc}")
    tsarchive(TSARCHIVE, "verify", "--allow-global", "aoti.*", copy)  # its compiled model is native code
    shown = json.loads(tsarchive(TSARCHIVE, "inspect", "--json", copy).stdout)
    check(shown.get("run_check", {}).get("method") == "model", f"{name}: inspect's run_check: {shown.get('run_check')}")

    # Tampered: one recorded output element moved fails the check (exit 1);
    # base64 that does not decode is one error line (exit 3).
    moved = [t.clone() for t in as_list(recorded_out)]
    moved[0].view(-1)[0] += 1.0
    buffer = io.BytesIO()
    torch.save(type(recorded_out)(moved) if isinstance(recorded_out, (list, tuple)) else moved[0], buffer)
    with open(os.path.join(tmp, "moved.b64"), "w") as f:
        f.write(base64.b64encode(buffer.getvalue()).decode())
    tsarchive(TSARCHIVE, "extra", "set", copy, "tsarchive/check_outputs.pt.b64=@" + os.path.join(tmp, "moved.b64"))
    tsarchive(TSARCHIVE, "run", copy, "--check", want=1)
    tsarchive(TSARCHIVE, "extra", "set", copy, "tsarchive/check_outputs.pt.b64=not base64!")
    p = tsarchive(TSARCHIVE, "run", copy, "--check", want=3)
    check("check_outputs.pt.b64 is not base64" in p.stderr, f"{name}: damaged base64: {p.stderr}")
    extra = load_pt2(copy).extra_files  # still text, still loads
    check(extra["tsarchive/check_outputs.pt.b64"] == "not base64!", f"{name}: after the edits: {extra}")


def check_sample_inputs(path, tmp):
    name = os.path.basename(path)
    with zipfile.ZipFile(path) as z:
        record = [n for n in z.namelist() if n.endswith("/data/sample_inputs/model.pt")][0]
        args, kwargs = torch.load(io.BytesIO(z.read(record)), weights_only=True)
    check(len(kwargs) > 0, f"{name}: the sample inputs have no kwargs to order")
    if refused_as_newer(path, "--sample-inputs"):
        return
    out_file = os.path.join(tmp, "sample_out.pt")
    doc = run_json(path, "--sample-inputs", "--save-outputs", out_file)
    if doc is None:
        return
    same(torch.load(out_file), aoti_load_package(path)(*args, **kwargs), f"{name} --sample-inputs")
    shapes = [i["shape"] for i in doc["inputs"] if i.get("type") == "Tensor"]
    want = [list(a.shape) for a in args] + [list(v.shape) for v in kwargs.values()]
    check(shapes == want, f"{name}: sample input shapes {shapes} vs {want}")


def edited_copy(source, path, edit):
    """A copy of a package with edit(name, bytes) -> bytes applied to each
    record, as zipfile stores it (the gate checks it like any other)."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as out:
        for info in src.infolist():
            data = edit(info.filename, src.read(info))
            out.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), data)


def json_edit(suffix, changes):
    def edit(name, data):
        if not name.endswith(suffix):
            return data
        doc = json.loads(data)
        doc.update(changes)
        return json.dumps(doc).encode()
    return edit


def check_claimed_cuda(tmp):
    """A package whose metadata says its kernels are CUDA .cubin files for
    compute capability 1.0: refused before libtorch loads it, in one line, by
    whichever reason this build and machine give."""
    claimed = os.path.join(tmp, "claimed_cuda_aoti.pt2")
    edited_copy(os.path.join(PT2, "mlp_dynamic_aoti.pt2"), claimed,
                json_edit("_metadata.json", {"AOTI_DEVICE_KEY": "cuda", "AOTI_COMPUTE_CAPABILITY": "10"}))
    p = tsarchive(TSARCHIVE, "run", claimed, "--input", "5x4", want=2)
    check("compiled for cuda, not cpu" in p.stderr and "--device cuda" in p.stderr, f"cpu refusal: {p.stderr}")
    version = subprocess.run([TSARCHIVE, "--version", "--verbose"], capture_output=True, text=True).stdout
    if "cuda built in" not in version:
        want, reason = 5, "has no CUDA support"
    elif " 0 device(s)" in version:
        want, reason = 5, "no CUDA device is visible"
    else:
        want, reason = 3, "compute capability 1.0 (AOTI_COMPUTE_CAPABILITY 10) without PTX"
    p = tsarchive(TSARCHIVE, "run", claimed, "--input", "5x4", "--device", "cuda", want=want)
    check(reason in p.stderr and len(p.stderr.strip().splitlines()) == 1 and "crashed" not in p.stderr,
          f"--device cuda on a claimed CUDA package: {p.stderr}")

    newer = os.path.join(tmp, "newer_torch_aoti.pt2")
    edited_copy(os.path.join(PT2, "run", "affine_sample_aoti.pt2"), newer,
                json_edit("models/model.json", {"torch_version": "9.0.0"}))
    p = tsarchive(TSARCHIVE, "run", newer, "--sample-inputs", want=3)
    check("exported by PyTorch 9.0.0, newer than this libtorch" in p.stderr
          and len(p.stderr.strip().splitlines()) == 1, f"newer PyTorch refusal: {p.stderr}")


def main():
    packages = sorted(os.path.join(PT2, n) for n in os.listdir(PT2) if n.endswith("_aoti.pt2"))
    # foreign_machine_aoti.pt2 says it was compiled for riscv64: refused below.
    packages += sorted(os.path.join(PT2, "run", n) for n in os.listdir(os.path.join(PT2, "run"))
                       if n.endswith(".pt2") and not n.startswith("foreign_"))
    check(len(packages) >= 3, f"packages: {packages}")

    # Skipped by what the build is, never by how a run failed: a libtorch 1.x
    # has no AOTInductor runner; any other failure below fails the check.
    built = subprocess.run([TSARCHIVE, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"^libtorch (\d+)\.", built, re.M)
    if m is None:
        sys.exit(f"FAIL: --version names no libtorch: {built!r}")
    if m.group(1) == "1":
        print("tsarchive is built against libtorch 1.x, which cannot run a .pt2; skipping")
        sys.exit(77)
    global LIBTORCH
    LIBTORCH = major_minor(re.search(r"^libtorch (\S+)", built, re.M).group(1))

    tmp = tempfile.mkdtemp(prefix="tsarchive-pt2-run-")
    try:
        for path in packages:
            check_package(path, tmp)
        check_sample_inputs(os.path.join(PT2, "run", "affine_sample_aoti.pt2"), tmp)

        # Refusals, each one line with its exit code, before any libtorch.
        p = tsarchive(TSARCHIVE, "run", os.path.join(PT2, "mlp_dynamic.pt2"), "--input", "2x4", want=3)
        check("aoti_compile_and_package" in p.stderr, f"no compile hint: {p.stderr}")
        p = tsarchive(TSARCHIVE, "run", os.path.join(PT2, "run", "foreign_machine_aoti.pt2"), "--sample-inputs", want=3)
        check("compiled for riscv64 (AOTI_MACHINE)" in p.stderr, f"machine refusal: {p.stderr}")
        p = tsarchive(TSARCHIVE, "run", packages[0], "--input", "5x4", "--device", "cuda", want=2)
        check("compiled for cpu" in p.stderr, f"device refusal: {p.stderr}")
        p = tsarchive(TSARCHIVE, "run", os.path.join(PT2, "mlp_dynamic_aoti.pt2"), "--sample-inputs", want=2)
        check("no sample inputs" in p.stderr, f"sample refusal: {p.stderr}")
        p = tsarchive(TSARCHIVE, "run", os.path.join(PT2, "mlp_dynamic_aoti.pt2"), "--input", "5x4", "--method", "other",
                      want=2)
        check("its models are: model" in p.stderr, f"model refusal: {p.stderr}")
        tsarchive(TSARCHIVE, "run", os.path.join(PT2, "mlp_dynamic_aoti.pt2"), "--input", "5x7", want=5)
        check_claimed_cuda(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish(f"{len(packages)} AOTInductor packages run as aoti_load_package runs them")


if __name__ == "__main__":
    main()
