#!/usr/bin/python3
"""A libtorch re-save (convert, trace, stamp without --keep-bytes) starts only when
there is room for its copy, counted as libtorch will write it: every record stored.

Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):

    /usr/bin/python3 tests/pytorch/check_resave_room.py TSARCHIVE

An archive whose records are deflated (a legal ZIP torch.jit.load reads) of
32 MiB of zeros is about 100 KB on disk. Under a file size limit of 8 MiB
(RLIMIT_FSIZE, as a full disk would be), the room check used the file's size,
so libtorch started, hit the limit and aborted: exit 5 and a libtorch
backtrace blaming "a file made to crash libtorch" (review 57a F4). Now: exit 4,
one error line naming the limit, nothing written.
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import zipfile

from harness import check, finish

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)
TSARCHIVE = os.path.abspath(sys.argv[1])


class Big(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("big", torch.zeros(8 << 20))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.big[0]


def limited():
    resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))


tmp = tempfile.mkdtemp(prefix="tsarchive-resave-room-")
try:
    plain = os.path.join(tmp, "plain.pt")
    deflated = os.path.join(tmp, "deflated.pt")
    torch.jit.save(torch.jit.script(Big()), plain)
    with zipfile.ZipFile(plain) as zi, zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as zo:
        for info in zi.infolist():
            zo.writestr(zipfile.ZipInfo(info.filename, (1980, 1, 1, 0, 0, 0)), zi.read(info),
                        compress_type=zipfile.ZIP_DEFLATED)
    check(os.path.getsize(deflated) < (1 << 20), f"the deflated archive has {os.path.getsize(deflated)} bytes")
    check(torch.equal(torch.jit.load(deflated).big, torch.zeros(8 << 20)), "torch.jit.load reads the deflated archive")
    out = os.path.join(tmp, "out.pt")
    for argv in (["convert", deflated, "--input", "2", "-o", out], ["stamp", "--no-git", "--no-host", deflated, "-o", out]):
        p = subprocess.run([TSARCHIVE] + argv, capture_output=True, text=True, preexec_fn=limited)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 4, f"{argv[0]} under an 8 MiB file size limit: exit {p.returncode}, wanted 4: {p.stderr}")
        check(len(lines) == 1 and "the file size limit (8 MiB)" in lines[0] and "libtorch's copy needs" in lines[0],
              f"{argv[0]}: one line naming the limit: {p.stderr}")
        check(not os.path.exists(out), f"{argv[0]}: nothing written")
        check(sorted(os.listdir(tmp)) == ["deflated.pt", "plain.pt"], f"{argv[0]}: nothing left: {os.listdir(tmp)}")
finally:
    shutil.rmtree(tmp)

finish("re-save room: counted as libtorch writes it")
