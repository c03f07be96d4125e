#!/usr/bin/python3
"""PyTorch still loads every .pt2 that `tsarchive extra` and `stamp` wrote.

Run by CTest with TSARCHIVE_PYTHON (exit 77, skipped, when it has no
torch.export: Debian's torch 1.13 has none; the venv of `scripts/dev.sh torch2`
has torch 2.13):

    .venv/bin/python tests/pytorch/check_pt2_edits.py TSARCHIVE TESTDATA_DIR

For every archive of testdata/pt2/ (torch.export.save programs and
AOTInductor packages written by PyTorch 2.13) it edits a copy with
`extra set` (new names, a name in a folder, a replaced name), `extra rm`,
`extra import --prune` and `stamp`, and checks after each that:
- torch.export.load(..., extra_files=...) loads a program with the same
  state dict and constants, bit for bit, and reads every extra file back
  (load_pt2's extra_files for a package);
- torch._inductor.aoti_load_package loads a package and gives the same
  outputs as the original on the package's own sample inputs (this loads the
  package's compiled code, which tsarchive itself never does);
- `verify` passes (and, after `stamp`, matches the stamp), `diff` against
  the original names exactly the extra files that changed;
and that set-then-rm of a new name gives back the original bytes, and a
value that is not UTF-8 is refused (exit 2) with the archive unchanged.
"""

import filecmp
import json
import os
import shutil
import sys
import tempfile

try:
    import torch
    import torch.export  # noqa: F401
    from torch.export import load as export_load
    from torch.export.pt2_archive._package import load_pt2
except ImportError:
    print("torch.export is not available for this python; skipping")
    sys.exit(77)

from harness import check, finish, tsarchive

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
PT2 = os.path.join(TESTDATA, "pt2")


def ts(*args, expect=0):
    # Exit 1 (diff: they differ; verify: changed since stamped) is an answer, not an error line.
    return tsarchive(TSARCHIVE, *args, want=expect, error_line=expect != 1)


def extra_names(path):
    doc = json.loads(ts("extra", "list", "--json", path).stdout)
    return {e["name"] for e in doc["extra_files"]}


def same_tensors(a, b):
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a)


def program_tensors(ep):
    out = dict(ep.state_dict)
    out.update({k: v for k, v in ep.constants.items() if isinstance(v, torch.Tensor)})
    return out


class Reference:
    """What the original archive loads as: tensors, or a package's outputs."""

    def __init__(self, path):
        self.package = bool(json.loads(ts("inspect", "--json", path).stdout)["pt2"]["aotinductor"])
        if self.package:
            from torch._inductor import aoti_load_package

            self.inputs = sample_inputs(path)
            self.outputs = aoti_load_package(path)(*self.inputs)
        else:
            self.tensors = program_tensors(export_load(path))


def sample_inputs(path):
    # An AOTInductor package of testdata carries no sample inputs; the program
    # of the same model (without _aoti) does, with the same signature.
    contents = load_pt2(path.replace("_aoti.pt2", ".pt2").replace(os.path.dirname(path), PT2))
    ep = contents.exported_programs["model"]
    args = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name != "USER_INPUT":
            continue
        node = next(n for n in ep.graph.nodes if n.name == spec.arg.name)
        val = node.meta["val"]
        shape = [int(d) if isinstance(d, int) else 3 for d in val.shape]
        g = torch.Generator().manual_seed(0)
        args.append(torch.rand(shape, generator=g).to(val.dtype) if val.dtype.is_floating_point
                    else torch.ones(shape, dtype=val.dtype))
    return args


def check_loads(name, path, ref, want_extra):
    """PyTorch loads `path` as it loaded the original, with `want_extra` as its extra files."""
    if ref.package:
        from torch._inductor import aoti_load_package

        try:
            outputs = aoti_load_package(path)(*ref.inputs)
        except Exception as e:  # noqa: BLE001 - any failure to load is the finding
            check(False, f"{name}: aoti_load_package failed: {e}")
            return
        same = all(torch.equal(a, b) for a, b in zip(outputs, ref.outputs)) if isinstance(outputs, (list, tuple)) \
            else torch.equal(outputs, ref.outputs)
        check(same, f"{name}: the package's outputs changed")
        got = load_pt2(path).extra_files
    else:
        got = {k: "" for k in want_extra}
        try:
            ep = export_load(path, extra_files=got)
        except Exception as e:  # noqa: BLE001
            check(False, f"{name}: torch.export.load failed: {e}")
            return
        check(same_tensors(program_tensors(ep), ref.tensors), f"{name}: tensors changed")
    check(set(got) == set(want_extra), f"{name}: extra files {sorted(got)} vs {sorted(want_extra)}")
    for key, text in want_extra.items():
        if text is not None:
            check(got.get(key) == text, f"{name}: extra file {key} reads {got.get(key)!r}, expected {text!r}")


def edit_one(original, work):
    name = os.path.basename(original)
    ref = Reference(original)
    path = os.path.join(work, name)
    shutil.copyfile(original, path)
    before = extra_names(path)
    expected = {k: None for k in before}

    # set then rm of a new name: the original bytes again
    ts("extra", "set", path, "tmp.txt=x")
    ts("extra", "rm", path, "tmp.txt")
    check(filecmp.cmp(original, path, shallow=False), f"{name}: set then rm did not give back the original bytes")
    # not UTF-8: refused, nothing written
    blob = os.path.join(work, "blob.bin")
    with open(blob, "wb") as f:
        f.write(b"\xff\xfe\x00binary")
    ts("extra", "set", path, "blob.bin=@" + blob, expect=2)
    check(filecmp.cmp(original, path, shallow=False), f"{name}: a refused set changed the file")

    ts("extra", "set", path, 'labels.json={"classes":["cat","dog"]}', "notes/card.md=# card\n", "owner=ml-platform")
    expected.update({"labels.json": '{"classes":["cat","dog"]}', "notes/card.md": "# card\n", "owner": "ml-platform"})
    ts("verify", "--allow-global", "aoti.*", path)
    check_loads(name + " after set", path, ref, expected)
    diff = json.loads(ts("diff", "--json", original, path, expect=1).stdout)
    changed = {e["name"] for e in diff["extra"]}
    check(changed == {"labels.json", "notes/card.md", "owner"}, f"{name}: diff names {sorted(changed)}")
    check(diff["tensors"] == [], f"{name}: diff reports tensor changes: {diff['tensors']}")
    # diff reads the weights by name: the original against itself compares them all, equal
    same = json.loads(ts("diff", "--json", original, original).stdout)
    check(same["same"] and same["tensors"] == [], f"{name}: diff of the original with itself")

    ts("extra", "rm", path, "owner")
    del expected["owner"]
    check_loads(name + " after rm", path, ref, expected)

    folder = os.path.join(work, name + ".extra")
    ts("extra", "export", path, folder)
    with open(os.path.join(folder, "labels.json"), "w") as f:
        f.write('{"classes":["bird"]}')
    ts("extra", "import", "--prune", path, folder)
    expected["labels.json"] = '{"classes":["bird"]}'
    check_loads(name + " after import", path, ref, expected)

    ts("stamp", "--no-git", "--no-host", path)
    stamp = json.loads(ts("extra", "get", path, "producer_info.json").stdout)
    check(stamp.get("_type", "").startswith("https://tsarchive.dev/producer-info/"), f"{name}: stamp _type")
    check(stamp.get("producer", {}).get("method") == "keep-bytes", f"{name}: stamp method")
    expected["producer_info.json"] = None
    check_loads(name + " after stamp", path, ref, expected)
    verified = json.loads(ts("verify", "--json", "--require-stamp", "--allow-global", "aoti.*", path).stdout)
    check(verified.get("stamp", {}).get("matches") is True, f"{name}: verify does not match the stamp: {verified.get('stamp')}")
    # A stamped archive whose extra file changes no longer matches its stamp.
    ts("extra", "set", path, "labels.json=changed")
    ts("verify", "--allow-global", "aoti.*", path, expect=1)


def main():
    names = sorted(n for n in os.listdir(PT2) if n.endswith(".pt2"))
    check(len(names) >= 5, f"testdata/pt2 holds {names}")
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            edit_one(os.path.join(PT2, name), work)
    finish(f"{len(names)} .pt2 archives edited and reloaded by torch.export.load / aoti_load_package: ok")


if __name__ == "__main__":
    main()
