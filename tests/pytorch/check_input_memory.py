#!/usr/bin/python3
"""What `run`'s input files cost in memory is what they hold, within a share
of the worker's --memory-limit (review 55b, findings 2, 3 and 4).

Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):

    /usr/bin/python3 tests/pytorch/check_input_memory.py TSARCHIVE

- a torch.save file whose storage record is deflated, declaring 256 MiB in a
  file of 256 KiB, is refused from its declared size under --memory-limit
  256M (inputs may take half of it): exit 3, one line, before the tsarchive
  process inflates it (it used to inflate it, up to 4 GiB, then the worker
  passed its limit); a small deflated storage, which torch.load reads, is read;
- a 128 MiB .npy given to a model that ignores it runs under --memory-limit
  600M: the worker held the payload, a contiguous copy, the copy as float64
  and three masks for the Inputs table, over 5 times the input;
- a 480-byte file holding a broadcast view ([2^26, 4], strides (0, 1), over
  4 floats) is passed as a view: exit 0 under --memory-limit 1G, its
  statistics torch.load's (the worker used to make 1 GiB of it, and 16 TiB
  for [2^40, 4]); a view whose overlapping strides would have the Inputs
  table read 2^40 elements over 41 is refused, naming its sizes and strides;
- a memory limit passed while the inputs are made says so, not "while
  running forward";
- a recorded check (run --check, serve --ready-check) is held to the same
  budget: its deflated 256 MiB inputs are refused under --memory-limit 256M;
- so are the extra files convert and trace carry into the new archive.
"""
import collections
import io
import json
import os
import pickle
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

TSARCHIVE = sys.argv[1]


def tsarchive(*args, want=0):
    return harness.tsarchive(TSARCHIVE, *args, want=want)


class _Storage:
    pass


def crafted_save(path, numel, sizes, strides, data, deflate=False):
    """A torch.save zip whose one tensor is `sizes`/`strides` over a float32
    storage of `numel` elements holding the blocks of `data`, stored, or
    deflated as torch.save never writes it and torch.load reads it."""
    class Tensor:
        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2,
                    (_Storage(), 0, tuple(sizes), tuple(strides), False, collections.OrderedDict()))

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.FloatStorage, "0", "cpu", numel) if isinstance(obj, _Storage) else None

    pkl = io.BytesIO()
    Pickler(pkl, protocol=2).dump(Tensor())
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a/data.pkl", pkl.getvalue())
        z.writestr("a/version", "3\n")
        info = zipfile.ZipInfo("a/data/0")
        info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
        with z.open(info, "w", force_zip64=True) as w:
            for block in data:
                w.write(block)


def error_line(p):
    return p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""


class Ignore(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(1)


tmp = tempfile.mkdtemp(prefix="tsarchive-input-memory-")
try:
    # A model that ignores its input: whatever the run takes is the input's.
    ignore = os.path.join(tmp, "ignore.pt")

    torch.jit.save(torch.jit.script(Ignore()), ignore)

    # 1. A deflated storage declaring 256 MiB: refused from its declared size.
    bomb = os.path.join(tmp, "bomb.pt")
    numel = (256 << 20) // 4
    crafted_save(bomb, numel, [numel], [1], (bytes(1 << 22) for _ in range((256 << 20) >> 22)), deflate=True)
    check(os.path.getsize(bomb) < (1 << 20), f"the deflated storage's file has {os.path.getsize(bomb)} bytes")
    p = tsarchive("run", ignore, "--input", "@" + bomb, "--memory-limit", "256M", want=3)
    line = error_line(p)
    check("storage records, inflated, would take 256 MiB" in line and "half of --memory-limit 256 MiB" in line,
          f"deflated 256 MiB storage: {line}")

    # A small deflated storage is what torch.load reads: so is it here.
    small = os.path.join(tmp, "small.pt")
    values = np.arange(16, dtype=np.float32)
    crafted_save(small, 16, [4, 4], [4, 1], [values.tobytes()], deflate=True)
    check(torch.equal(torch.load(small), torch.arange(16.0).reshape(4, 4)), "torch.load reads a deflated storage")
    saved = os.path.join(tmp, "small_in.pt")
    tsarchive("run", ignore, "--input", "@" + small, "--save-inputs", saved)
    check(torch.equal(torch.load(saved)[0], torch.arange(16.0).reshape(4, 4)), "the deflated storage's values")

    # 2. A 128 MiB .npy to a model that ignores it, under a limit the worker's
    # copies and float64 statistics used to pass (about 5.5 times the input).
    big = os.path.join(tmp, "big.npy")
    np.save(big, np.ones((32, 1024, 1024), np.float32))
    # An AddressSanitizer build's shadow memory and quarantine take more beside it: that build checks
    # the same path under a limit of its own (the release build is what the bound is about).
    sanitized = "libasan" in subprocess.run(["ldd", TSARCHIVE], capture_output=True, text=True).stdout
    p = tsarchive("run", ignore, "--input", "@" + big, "--memory-limit", "1500M" if sanitized else "600M", "--json")
    if p.returncode == 0:
        summary = json.loads(p.stdout)["inputs"][0]
        check(summary["mean"] == 1.0 and summary["std"] == 0.0 and summary["numel"] == 32 << 20,
              f"statistics of the 128 MiB input: {summary}")
    os.remove(big)

    # Limits passed while making the inputs say so: a generated 1 GiB tensor under 600M.
    p = tsarchive("run", ignore, "--input", "256x1024x1024", "--memory-limit", "600M", want=5)
    line = error_line(p)
    check("--memory-limit" in line and "while preparing the inputs" in line, f"limit while making the inputs: {line}")

    # 3. A broadcast view: a view, as torch.load gives it.
    view = os.path.join(tmp, "view.pt")
    crafted_save(view, 4, [1 << 26, 4], [0, 1], [np.array([1, 2, 3, 4], np.float32).tobytes()])
    check(os.path.getsize(view) < 1024, f"the broadcast view's file has {os.path.getsize(view)} bytes")
    loaded = torch.load(view)
    check(loaded.stride() == (0, 1) and loaded.shape == (1 << 26, 4), "torch.load gives the broadcast view")
    p = tsarchive("run", ignore, "--input", "@" + view, "--memory-limit", "1G", "--json")
    if p.returncode == 0:
        summary = json.loads(p.stdout)["inputs"][0]
        check(summary["shape"] == [1 << 26, 4] and summary["numel"] == 1 << 28, f"broadcast view: {summary}")
        want = loaded[:4].double()
        check(summary["mean"] == 2.5 and summary["min"] == 1.0 and summary["max"] == 4.0, f"broadcast view: {summary}")
        # std of the view is the population std of 1..4 scaled to n - 1 of 2^28 elements.
        n = 1 << 28
        expected_std = (want.var(unbiased=False).item() * n / (n - 1)) ** 0.5
        check(abs(summary["std"] - expected_std) < 1e-9, f"broadcast view std {summary['std']} vs {expected_std}")
    huge = os.path.join(tmp, "huge_view.pt")
    crafted_save(huge, 4, [1 << 40, 4], [0, 1], [np.array([1, 2, 3, 4], np.float32).tobytes()])
    tsarchive("run", ignore, "--input", "@" + huge, "--memory-limit", "1G")

    # Overlapping strides, no broadcast: 2^40 elements over 41; refused by name.
    overlap = os.path.join(tmp, "overlap.pt")
    crafted_save(overlap, 41, [2] * 40, [1] * 40, [bytes(41 * 4)])
    p = tsarchive("run", ignore, "--input", "@" + overlap, want=3)
    line = error_line(p)
    check("sizes [" + ", ".join(["2"] * 40) + "], strides [" + ", ".join(["1"] * 40) + "]" in line and
          "views its storage 'data/0' of 164 B as 4.00 TiB of elements" in line, f"overlapping view: {line}")

    # 4. What the archive's author put in it for the run is held to the same budget: a
    # recorded check (run --check, serve --ready-check) whose inputs are the deflated
    # 256 MiB storage used to be read within a fixed 4 GiB, whatever --memory-limit said.
    checked = os.path.join(tmp, "checked.pt")
    shutil.copy(ignore, checked)
    tsarchive("run", checked, "--input", "4", "--record")
    # The check itself runs within the limit (an AddressSanitizer build's worker needs more beside it).
    tsarchive("run", checked, "--check", "--memory-limit", "1500M" if sanitized else "256M")
    planted = os.path.join(tmp, "planted.pt")
    tsarchive("extra", "set", checked, "tsarchive/check_inputs.pt=@" + bomb, "-o", planted)
    p = tsarchive("run", planted, "--check", "--memory-limit", "256M", want=3)
    line = error_line(p)
    check("storage records, inflated, would take 256 MiB" in line and "half of --memory-limit 256 MiB" in line and
          "planted.pt" in line, f"recorded check with a deflated 256 MiB storage: {line}")
    p = tsarchive("serve", planted, "--ready-check", "--memory-limit", "256M", "--port", "0", want=3)
    line = error_line(p)
    check("storage records, inflated, would take 256 MiB" in line, f"serve --ready-check of it: {line}")

    # 5. convert and trace carry the original's extra files into the new archive, held in the
    # tsarchive process whole (review 57a F2: 2 x 1 GiB deflated extra files in a 2 MB archive took
    # it to 12.6 GB, no --memory-limit applying). They are budgeted by declared size, before inflating.
    carrying = os.path.join(tmp, "carrying.pt")
    shutil.copy(ignore, carrying)
    with zipfile.ZipFile(carrying) as z:
        top = z.namelist()[0].split("/")[0]
    with zipfile.ZipFile(carrying, "a") as z:
        z.writestr(top + "/extra/big.bin", bytes(256 << 20), compress_type=zipfile.ZIP_DEFLATED)
    check(os.path.getsize(carrying) < (1 << 20), f"the deflated extra file's archive has {os.path.getsize(carrying)} bytes")
    converted = os.path.join(tmp, "converted.pt")
    for command in ("convert", "trace"):
        p = tsarchive(command, carrying, "-o", converted, "--memory-limit", "256M", "--input", "4", want=3)
        line = error_line(p)
        check("extra/big.bin would take 256 MiB" in line and "that extra files may take in memory" in line and
              "half of --memory-limit 256 MiB" in line and "carrying.pt" in line,
              f"{command} carrying a deflated 256 MiB extra file: {line}")
        check(not os.path.exists(converted), f"{command}: nothing written")
finally:
    shutil.rmtree(tmp)

finish("input memory: declared sizes budgeted, inputs passed as views, phases named")
