#!/usr/bin/python3
"""`extra get` streams: a 256 MiB extra file deflated to a
few hundred KiB (a zip bomb, as far as memory goes) is written to a pipe or to
-o FILE with bounded memory; `| head -c 100` gets its bytes; a record that
fails its CRC leaves no -o file behind.

    extra_get_stream.py TSARCHIVE TESTDATA_DIR
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

tsarchive, testdata = sys.argv[1], sys.argv[2]
SIZE = 256 << 20
STREAM_ALLOWANCE_KB = 64 << 10  # above what `extra list` of the same file needs; the value is 256 MiB
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def make_archive(path, corrupt=False):
    """mlp_scripted.pt's records plus extra/big.bin: SIZE zero bytes, deflated."""
    src = zipfile.ZipFile(os.path.join(testdata, "mlp_scripted.pt"))
    with zipfile.ZipFile(path, "w") as out:
        for info in src.infolist():
            out.writestr(info.filename, src.read(info.filename), compress_type=zipfile.ZIP_STORED)
        info = zipfile.ZipInfo("mlp_scripted/extra/big.bin")
        info.compress_type = zipfile.ZIP_DEFLATED
        with out.open(info, "w", force_zip64=True) as f:
            chunk = bytes(1 << 20)
            for _ in range(SIZE >> 20):
                f.write(chunk)
    if corrupt:  # the central CRC of big.bin (the last central record), off by one
        data = bytearray(open(path, "rb").read())
        at = data.rfind(b"PK\x01\x02")
        data[at + 16] ^= 1
        data[data.rfind(b"PK\x03\x04") + 14] ^= 1  # its local copy too: they must agree
        open(path, "wb").write(data)


def max_rss_kb(argv, stdout):
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], stdout=stdout, stderr=subprocess.PIPE, timeout=300)
    return p.returncode, int(p.stderr.decode().strip().splitlines()[-1]), p.stderr.decode()


work = tempfile.mkdtemp()
try:
    model = os.path.join(work, "m.pt")
    make_archive(model)
    expected = hashlib.sha256(bytes(SIZE)).hexdigest()

    # The limit is relative to a command that reads no value (sanitizer builds
    # start at ~110 MiB).
    code, base, err = max_rss_kb([tsarchive, "extra", "list", model], subprocess.DEVNULL)
    check(code == 0, f"extra list: exit {code}: {err}")
    RSS_LIMIT_KB = base + STREAM_ALLOWANCE_KB
    with open(os.devnull, "wb") as null:
        code, rss, err = max_rss_kb([tsarchive, "extra", "get", "--force", model, "big.bin"], null)
    check(code == 0, f"extra get to a pipe: exit {code}: {err}")
    check(rss < RSS_LIMIT_KB, f"extra get to a pipe used {rss} KiB (limit {RSS_LIMIT_KB})")
    print(f"extra get --force (256 MiB) to /dev/null: max RSS {rss / 1024:.1f} MiB ({base / 1024:.1f} MiB for extra list)")

    out = os.path.join(work, "big.bin")
    code, rss, err = max_rss_kb([tsarchive, "extra", "get", "--force", model, "big.bin", "-o", out], subprocess.DEVNULL)
    check(code == 0, f"extra get -o: exit {code}: {err}")
    check(rss < RSS_LIMIT_KB, f"extra get -o used {rss} KiB (limit {RSS_LIMIT_KB})")
    h = hashlib.sha256()
    with open(out, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    check(h.hexdigest() == expected, "extra get -o wrote other bytes")
    print(f"extra get --force (256 MiB) -o FILE: max RSS {rss / 1024:.1f} MiB")

    p = subprocess.run(f"'{tsarchive}' extra get --force '{model}' big.bin | head -c 100 | od -v -An -tx1 | tr -d ' \\n'",
                       shell=True, capture_output=True, text=True, timeout=300)
    check(p.stdout == "00" * 100, f"| head -c 100 gave {p.stdout[:40]!r}")

    bad = os.path.join(work, "bad.pt")
    make_archive(bad, corrupt=True)
    out_bad = os.path.join(work, "bad.bin")
    p = subprocess.run([tsarchive, "extra", "get", "--force", bad, "big.bin", "-o", out_bad], capture_output=True,
                       text=True, timeout=300)
    check(p.returncode == 3 and "CRC" in p.stderr, f"damaged record: exit {p.returncode}: {p.stderr!r}")
    check(not os.path.exists(out_bad), "a damaged record left an -o file")
    check(not [n for n in os.listdir(work) if ".tsarchive-" in n], f"temp files left: {os.listdir(work)}")
finally:
    shutil.rmtree(work, ignore_errors=True)

print(f"extra get streaming: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
