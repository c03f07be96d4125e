#!/usr/bin/python3
"""A journal planted next to an archive never rewrites it. The attacker is another user who can write the folder (or
a user who can plant a file in a sticky /tmp-like folder): they write
".model.pt.tsarchive-journal" whose CRC holds and whose "old bytes" are a
different model. Commands that only read must leave the archive byte-identical
(and say a journal is there); commands that edit must refuse the journal with
one line and exit 4; only the archive owner's own journal, in a folder only
they control, is applied.

    journal_trust.py TSARCHIVE TESTDATA_DIR
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

tsarchive, testdata = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run([tsarchive, *args], capture_output=True, text=True, errors="replace", timeout=120)
    return p.returncode, p.stdout, p.stderr


def forged_journal(target, replacement):
    """A version-2 journal that, if applied, turns `target` into `replacement`."""
    st = os.stat(target)
    size = st.st_size
    new_size, new_crc = size, zlib.crc32(b"not the bytes that are there") & 0xFFFFFFFF
    old_size = len(replacement)
    if old_size < size:  # the file's size must lie between the two, as after a kill
        new_size = size + 1
    body = b"tsarchive-journal 2\n"
    body += struct.pack("<QQQQQI", st.st_dev, st.st_ino, 0, old_size, new_size, new_crc)
    body += struct.pack("<Q", len(replacement)) + replacement
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


work = tempfile.mkdtemp()
try:
    model = os.path.join(work, "model.pt")
    shutil.copy(os.path.join(testdata, "mlp_scripted.pt"), model)
    code, out, err = run("stamp", "--keep-bytes", model)
    check(code == 0, f"stamp --keep-bytes exit {code}: {err}")
    stamped = open(model, "rb").read()
    other = open(os.path.join(testdata, "convnet_traced.pt"), "rb").read()
    journal = os.path.join(work, ".model.pt.tsarchive-journal")
    with open(journal, "wb") as f:
        f.write(forged_journal(model, other))
    os.chmod(journal, 0o644)
    root = os.geteuid() == 0
    if root:
        os.chown(journal, 65534, 65534)  # written by another user

    # Reading commands: byte-identical afterwards, the journal named in a note.
    for args in (["extra", "list", model], ["extra", "get", model, "labels.json"], ["inspect", model],
                 ["verify", model], ["diff", model, model],
                 ["extra", "export", model, os.path.join(work, "out")]):
        code, out, err = run(*args)
        check(open(model, "rb").read() == stamped, f"{' '.join(args[:2])} changed the archive")
        check(code in (0, 1) and "journal" in err, f"{' '.join(args[:2])}: exit {code}, stderr {err!r}")
        check("undid" not in err, f"{' '.join(args[:2])} says it undid an edit: {err!r}")
    code, out, err = run("verify", model)
    check(code == 0 and "intact" in out, f"verify of the untouched stamped archive: exit {code}, {out!r}")

    # Editing commands refuse a journal another user wrote.
    if root:
        code, out, err = run("extra", "set", model, "x=1")
        check(code == 4 and "cannot trust" in err and "uid 65534" in err, f"extra set: exit {code}, {err!r}")
        check(open(model, "rb").read() == stamped and os.path.exists(journal), "extra set applied or removed it")
        code, out, err = run("stamp", "--keep-bytes", model)
        check(code == 4 and "cannot trust" in err, f"stamp: exit {code}, {err!r}")
        os.chown(journal, 0, 0)

    # The owner's journal in a folder others may write to: still refused.
    os.chmod(journal, 0o600)
    os.chmod(work, 0o777)
    code, out, err = run("extra", "rm", model, "labels.json")
    check(code == 4 and "writable by others" in err, f"extra rm in a 0777 folder: exit {code}, {err!r}")
    check(open(model, "rb").read() == stamped, "extra rm in a 0777 folder changed the archive")
    code, out, err = run("extra", "set", "--in-place", model, "y=2")
    check(code in (2, 4), f"--in-place in a 0777 folder: exit {code}, {err!r}")
    os.chmod(work, 0o700)

    # The owner's own journal, where only they can write: applied, and said so.
    code, out, err = run("extra", "set", model, "x=1")
    check(code == 3 or code == 0, f"extra set with the owner's journal: exit {code}, {err!r}")
    check("undid an interrupted --in-place edit" in err, f"no recovery note: {err!r}")
    check(not os.path.exists(journal), "the applied journal is still there")
finally:
    shutil.rmtree(work, ignore_errors=True)

print(f"journal trust: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
