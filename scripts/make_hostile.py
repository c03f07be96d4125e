#!/usr/bin/python3
"""Writes the hostile corpus, testdata/hostile/.

Every file is a small, deliberate edit of a real PyTorch archive
(testdata/mlp_scripted.pt, testdata/mlp.ptl, written by make_testdata.py with
Debian's torch) or a file made from scratch. The archives are re-assembled by
the ZIP writer below, which lays records out the way PyTorchStreamWriter does
(UTF-8 names, "FB" padding to 64-byte data offsets, ZIP64 end records) but
lets each case lie in exactly one place: a CRC, a size, a name, an offset.
`ok_rebuilt.pt` is the unedited rebuild, the control: it must verify and run.

Every case is one line in CASES: name, description, how to make it. The
descriptions also go into testdata/README.md (the `hostile/` lines of its file
list), and tests/cli/hostile_all.sh reads the expected outcomes from its own
table, so a new case here is one line here and, if it is not exit 3/5 for
every command, one line there.

Run from the repository root (needs no torch; Debian's python3 is enough):

    /usr/bin/python3 scripts/make_hostile.py [TESTDATA_DIR]
"""

import copy
import os
import random
import struct
import sys
import zipfile
import zlib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------
# A ZIP writer that can lie.

class Rec:
    """One entry. `data` is the uncompressed content; the fields after it
    override what the headers say (None: the truth)."""

    def __init__(self, name, data, method=0, **lie):
        self.name = name
        self.data = data
        self.method = method
        self.raw = lie.pop("raw", None)            # compressed bytes as written
        self.crc = lie.pop("crc", None)
        self.csize = lie.pop("csize", None)        # central compressed size
        self.usize = lie.pop("usize", None)        # central uncompressed size
        self.local_name = lie.pop("local_name", None)
        self.flags = lie.pop("flags", 0x0800)      # bit 11: UTF-8 names
        self.zip64_extra = lie.pop("zip64_extra", None)  # (usize, csize, offset) or None
        self.offset = lie.pop("offset", None)      # central local-header offset
        self.central_only = lie.pop("central_only", False)
        # The local header's own fields (None: what the central header says).
        self.local_method = lie.pop("local_method", None)
        self.local_flags = lie.pop("local_flags", None)
        self.local_crc = lie.pop("local_crc", None)
        self.local_csize = lie.pop("local_csize", None)
        self.local_usize = lie.pop("local_usize", None)
        # PyTorch 1.13's shape: flag bit 3, zero CRC and sizes locally, a data
        # descriptor with the real ones after the data.
        self.descriptor = lie.pop("descriptor", False)
        assert not lie, lie

    def compressed(self):
        if self.raw is not None:
            return self.raw
        if self.method == 8:
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            return c.compress(self.data) + c.flush()
        return self.data


def name_bytes(name):
    """UTF-8; a lone surrogate U+DCXX stands for the byte XX (Python's
    surrogateescape), for names that are not UTF-8."""
    return name.encode("utf-8", "surrogateescape")


def local_header(name, method, crc, csize, usize, flags, header_at):
    """A local header padded with PyTorch's FB field so data starts on 64 bytes."""
    fixed = 30 + len(name)
    pad = (64 - (header_at + fixed + 4) % 64) % 64
    extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, flags, method, 0, 0x21,
                       crc, csize, usize, len(name), len(extra)) + name + extra


def build(recs, prefix=b"", comment=b"", entry_count=None, cd_offset=None, cd_size=None,
          zip64=True, shift=0):
    """Lays out `recs`; `prefix` bytes come first (offsets are not adjusted
    unless `shift` says by how much to adjust them)."""
    out = bytearray(prefix)
    offsets = []
    for r in recs:
        if r.central_only:
            offsets.append(None)
            continue
        body = r.compressed()
        crc = zlib.crc32(r.data) & 0xFFFFFFFF
        offsets.append(len(out))
        fields = (crc, len(body), len(r.data))
        if r.descriptor:
            fields = (0, 0, 0)
        out += local_header(name_bytes(r.local_name or r.name),
                            r.method if r.local_method is None else r.local_method,
                            fields[0] if r.local_crc is None else r.local_crc,
                            fields[1] if r.local_csize is None else r.local_csize,
                            fields[2] if r.local_usize is None else r.local_usize,
                            (r.flags | (8 if r.descriptor else 0)) if r.local_flags is None else r.local_flags,
                            len(out))
        out += body
        if r.descriptor:
            out += struct.pack("<IIII", 0x08074B50, crc, len(body), len(r.data))
    cd_start = len(out)
    for r, off in zip(recs, offsets):
        body = r.compressed()
        crc = r.crc if r.crc is not None else zlib.crc32(r.data) & 0xFFFFFFFF
        csize = r.csize if r.csize is not None else len(body)
        usize = r.usize if r.usize is not None else len(r.data)
        lho = r.offset if r.offset is not None else off - len(prefix) + shift
        extra = b""
        if r.zip64_extra is not None:
            extra = struct.pack("<HH", 1, 8 * len(r.zip64_extra)) + b"".join(
                struct.pack("<Q", v) for v in r.zip64_extra)
        name = name_bytes(r.name)
        flags = r.flags | (8 if r.descriptor else 0)
        out += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 20, flags, r.method, 0, 0x21,
                           crc, csize & 0xFFFFFFFF, usize & 0xFFFFFFFF, len(name), len(extra), 0, 0, 0,
                           0, lho & 0xFFFFFFFF) + name + extra
    cd_len = len(out) - cd_start
    n = len(recs) if entry_count is None else entry_count
    cdo = cd_start - len(prefix) + shift if cd_offset is None else cd_offset
    cds = cd_len if cd_size is None else cd_size
    if zip64:
        z64_at = len(out) - len(prefix) + shift
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, n, n, cds, cdo)
        out += struct.pack("<IIQI", 0x07064B50, 0, z64_at, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(n, 0xFFFF), min(n, 0xFFFF),
                       min(cds, 0xFFFFFFFF), min(cdo, 0xFFFFFFFF), len(comment)) + comment
    return bytes(out)


def read_recs(path):
    with zipfile.ZipFile(path) as z:
        return [Rec(i.filename, z.read(i), i.compress_type) for i in z.infolist()]


# --------------------------------------------------------------------------
# Pickle pieces (protocol 2) for hand-made data.pkl records.

def pkl(*ops):
    return b"\x80\x02" + b"".join(ops) + b"."


def memo_bomb(levels):
    """A list holding the previous level twice, `levels` deep: 2**levels
    leaves to a walker that expands memo references instead of sharing them."""
    ops = [b"]", b"q\x00"]  # EMPTY_LIST, BINPUT 0
    for i in range(1, levels + 1):
        ops += [b"]", b"(", b"h" + bytes([i - 1]), b"h" + bytes([i - 1]), b"e", b"q" + bytes([i])]
    return pkl(*ops)


def memo_long_paths(levels, key_length):
    """A tensor at the bottom of `levels` dicts, each holding the one below under two
    `key_length`-byte keys through the memo: 2**levels paths to the tensor, each
    levels * key_length bytes long, in a few KiB."""
    def key(i, c):
        text = (c + str(i)).ljust(key_length, c).encode()
        return b"X" + struct.pack("<I", len(text)) + text  # BINUNICODE
    storage = b"(" + b"X\x07\x00\x00\x00storage" + b"ctorch\nFloatStorage\n" + \
        b"X\x01\x00\x00\x000" + b"X\x03\x00\x00\x00cpu" + b"K\x04" + b"tQ"  # MARK ... TUPLE BINPERSID
    ops = [b"ctorch._utils\n_rebuild_tensor_v2\n", b"(", storage, b"K\x00", b"K\x04\x85", b"K\x01\x85", b"\x89",
           b"ccollections\nOrderedDict\n", b")R", b"tR", b"q\x00"]
    for i in range(1, levels + 1):
        ops += [b"0", b"}", b"(", key(i, "a"), b"h" + bytes([i - 1]), key(i, "b"), b"h" + bytes([i - 1]), b"u",
                b"q" + bytes([i])]
    return pkl(*ops)


def deep_nesting(depth):
    """`depth` lists, each inside the next: recursion depth for walkers."""
    return pkl(b"]" * depth, b"a" * (depth - 1))


def self_cycle():
    """A list that contains itself (memo GET of the list being built)."""
    return pkl(b"]", b"q\x00", b"h\x00", b"a")


# --------------------------------------------------------------------------
# The cases.

def replace_rec(recs, suffix, **changes):
    out = []
    found = False
    for r in recs:
        if r.name.endswith(suffix) and not found:
            found = True
            fields = dict(method=r.method)
            data = changes.pop("data", r.data)
            fields.update(changes)
            out.append(Rec(r.name, data, **fields))
        else:
            out.append(r)
    assert found, suffix
    return out


def drop_rec(recs, suffix):
    out = [r for r in recs if not r.name.endswith(suffix)]
    assert len(out) == len(recs) - 1, suffix
    return out


def with_descriptors(recs):
    """The same records (lies included) with PyTorch 1.13's local headers."""
    out = []
    for r in recs:
        r = copy.copy(r)
        r.descriptor = True
        out.append(r)
    return out


def rename_top(recs, old, new):
    return [Rec(new + r.name[len(old):], r.data, r.method) for r in recs]


def make_cases(testdata):
    mlp_path = os.path.join(testdata, "mlp_scripted.pt")
    ptl_path = os.path.join(testdata, "mlp.ptl")
    with open(mlp_path, "rb") as f:
        mlp_bytes = f.read()
    # Without the *.debug_pkl records (libtorch reads them only for error
    # messages): it halves every file and keeps the folder small.
    base = [r for r in read_recs(mlp_path) if not r.name.endswith(".debug_pkl")]
    lite = [r for r in read_recs(ptl_path) if not r.name.endswith(".debug_pkl")]
    top = base[0].name.split("/")[0]
    ok = build(base)
    with zipfile.ZipFile(mlp_path) as z:
        data_pkl = z.read(top + "/data.pkl")
        models_py = z.read(top + "/code/__torch__/models.py")
        linear_py = z.read(top + "/code/__torch__/torch/nn/modules/linear.py")
    with zipfile.ZipFile(ptl_path) as z:
        bytecode = z.read("mlp/bytecode.pkl")

    cases = []

    def case(name, text, data):
        cases.append((name, text, data))

    # The six files make_testdata.py always wrote (same bytes).
    case("empty.pt", "0 bytes.", b"")
    case("not_zip.pt", "A few lines of text.",
         b"This is not a PyTorch archive.\nJust a few lines of text.\nPK? no, not really.\n")
    case("random.bin", "4096 bytes from random.Random(1234).",
         bytes(random.Random(1234).getrandbits(8) for _ in range(4096)))
    case("truncated.pt", "First half of mlp_scripted.pt (no central directory).",
         mlp_bytes[: len(mlp_bytes) // 2])
    case("truncated_tail.pt", "mlp_scripted.pt minus its last 10 bytes (broken end-of-central-directory record).",
         mlp_bytes[:-10])

    # The control.
    case("ok_rebuilt.pt", "Control: mlp_scripted.pt re-assembled by make_hostile.py's ZIP writer without its "
         "*.debug_pkl records, otherwise unedited (must verify and run: the other cases differ from it by "
         "their one lie only).", ok)

    # Not a ZIP / random.
    rnd = random.Random(8)
    case("random_pk_header.bin", "`PK\\3\\4` followed by 2000 random bytes.",
         b"PK\x03\x04" + bytes(rnd.getrandbits(8) for _ in range(2000)))
    fake_end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 3, 3, 138, 100, 0)
    case("random_with_end_record.bin", "`PK\\3\\4`, 300 random bytes, then an end record claiming 3 entries "
         "at offset 100 (a central directory made of noise).",
         b"PK\x03\x04" + bytes(rnd.getrandbits(8) for _ in range(300)) + fake_end)

    # Truncation at many offsets.
    for at in (4, 30, 64, 200, 1000, 3000, 6000, len(ok) - 400, len(ok) - 90, len(ok) - 30):
        case("truncated_at_%05d.pt" % at, "ok_rebuilt.pt cut to its first %d of %d bytes." % (at, len(ok)),
             ok[:at])

    # CRCs.
    case("bad_crc_tensor.pt", "Central CRC-32 of data/1 (a weight record) off by one.",
         build(replace_rec(base, "/data/1", crc=(zlib.crc32(base[4].data) + 1) & 0xFFFFFFFF)))
    flipped = bytearray(data_pkl)
    flipped[len(flipped) // 2] ^= 0x01
    r = replace_rec(base, "/data.pkl", data=bytes(flipped), crc=zlib.crc32(data_pkl) & 0xFFFFFFFF)
    case("bad_crc_data_pkl.pt", "One bit flipped in data.pkl, CRC left as it was (libtorch never checks it).",
         build(r))
    code_bits = bytearray(models_py)
    code_bits[10] ^= 0x20
    case("bad_crc_code.pt", "One bit flipped in deflated code/__torch__/models.py, CRC left as it was.",
         build(replace_rec(base, "/code/__torch__/models.py", data=bytes(code_bits),
                           crc=zlib.crc32(models_py) & 0xFFFFFFFF)))
    good_raw = zlib.compressobj(6, zlib.DEFLATED, -15)
    good_raw = good_raw.compress(models_py) + good_raw.flush()
    case("corrupt_deflate_code.pt", "The deflate stream of code/__torch__/models.py with its middle bytes "
         "overwritten (sizes and CRC of the original).",
         build(replace_rec(base, "/code/__torch__/models.py",
                           raw=good_raw[:40] + b"\xff" * 40 + good_raw[80:])))

    # Names.
    case("name_mismatch.pt", "Local header of data/1 names data/7 (central says data/1).",
         build(replace_rec(base, "/data/1", local_name=top + "/data/7")))
    case("duplicate_names.pt", "data/1 twice (the second copy holds other bytes).",
         build(base + [Rec(top + "/data/1", b"\x00" * 512)]))
    case("duplicate_data_pkl.pt", "data.pkl twice: a second, different module pickle after the first.",
         build(base + [Rec(top + "/data.pkl", pkl(b"N"))]))
    case("outside_top_folder.pt", "An extra entry `evil.txt` at the root, outside the top folder.",
         build(base + [Rec("evil.txt", b"boo\n")]))
    half = [r for r in base if "/data/" in r.name]
    case("two_top_folders.pt", "The data/ records under a second top folder `other/`.",
         build([r for r in base if "/data/" not in r.name] +
               [Rec("other/" + r.name.split("/", 1)[1], r.data, r.method) for r in half]))
    case("no_top_folder.pt", "Every record at the root (`data.pkl`, `code/...`), no top folder.",
         build([Rec(r.name.split("/", 1)[1], r.data, r.method) for r in base]))
    case("traversal_extra.pt", "An extra file named `extra/../../../../tmp/tsarchive_pwned`.",
         build(base + [Rec(top + "/extra/../../../../tmp/tsarchive_pwned", b"pwned\n")]))
    case("traversal_top.pt", "Top folder `..`: every record is `../<record>`.",
         build(rename_top(base, top, "..")))
    case("absolute_names.pt", "Top folder `/tmp/abs`: every record has an absolute name.",
         build(rename_top(base, top, "/tmp/abs")))
    case("absolute_extra.pt", "An extra file named `extra//etc/passwd` (absolute after the prefix).",
         build(base + [Rec(top + "/extra//etc/passwd", b"root:x:0:0\n")]))
    case("backslash_names.pt", "An extra file named `extra\\..\\..\\evil` (Windows separators).",
         build(base + [Rec(top + "/extra\\..\\..\\evil", b"x\n")]))
    case("nul_in_name.pt", "An extra file whose name holds a NUL byte (`extra/a\\0b`).",
         build(base + [Rec(top + "/extra/a\x00b", b"x\n")]))

    # Overlapping entries: a second central entry whose local header sits
    # inside the first one's data (the "non-recursive zip bomb" shape).
    inner_name = (top + "/extra/inner.txt").encode()
    inner_body = b"inner\n"
    recs = list(base)
    # Host goes first so its offset is known: local header at 0, data at 64.
    inner_local = local_header(inner_name, 0, zlib.crc32(inner_body), len(inner_body), len(inner_body), 0x0800, 64)
    host = Rec(top + "/extra/host.bin", inner_local + inner_body)
    inner = Rec(top + "/extra/inner.txt", inner_body, central_only=True, offset=64)
    case("overlapping_entries.pt", "extra/inner.txt's local header lies inside extra/host.bin's data "
         "(two central entries share bytes).", build([host] + recs + [inner]))
    case("same_offset_entries.pt", "Two central entries (extra/a.txt, extra/b.txt) point at one local header.",
         build([Rec(top + "/extra/a.txt", b"same\n")] + recs +
               [Rec(top + "/extra/b.txt", b"same\n", central_only=True, offset=0)]))

    # Sizes that lie.
    d1 = base[4]
    assert d1.name.endswith("/data/1")
    case("huge_usize_zip64.pt", "data/1 declares 2**40 uncompressed bytes through a ZIP64 field.",
         build(replace_rec(base, "/data/1", usize=0xFFFFFFFF, zip64_extra=(1 << 40,))))
    case("huge_csize.pt", "data/1 declares a 4000000000-byte compressed size (past the end of the file).",
         build(replace_rec(base, "/data/1", csize=4000000000)))
    case("ffffffff_no_zip64.pt", "data/1 sizes are 0xFFFFFFFF with no ZIP64 extra field.",
         build(replace_rec(base, "/data/1", csize=0xFFFFFFFF, usize=0xFFFFFFFF)))
    case("offset_ffffffff_no_zip64.pt", "data.pkl's local header offset is 0xFFFFFFFF with no ZIP64 field.",
         build(replace_rec(base, "/data.pkl", offset=0xFFFFFFFF)))
    case("usize_too_small.pt", "data/1 declares 100 uncompressed bytes but holds 512 (stored).",
         build(replace_rec(base, "/data/1", usize=100)))
    case("usize_too_big_code.pt", "Deflated code/__torch__/models.py declares 100000 uncompressed bytes; "
         "it inflates to 649.", build(replace_rec(base, "/code/__torch__/models.py", usize=100000)))
    case("usize_too_small_code.pt", "Deflated code/__torch__/models.py declares 100 uncompressed bytes; "
         "it inflates to 649.", build(replace_rec(base, "/code/__torch__/models.py", usize=100)))
    case("entry_count_huge.pt", "End records claim 1000000 entries.", build(base, entry_count=1000000))
    case("cd_offset_past_end.pt", "End records put the central directory past the end of the file.",
         build(base, cd_offset=10 ** 9))
    cd_len = sum(46 + len(r.name.encode()) for r in base)
    case("cd_size_lies.pt", "End records claim a central directory 4 bytes shorter than it is.",
         build(base, cd_size=cd_len - 4))
    case("local_offset_past_cd.pt", "data/1's local header offset points into the central directory.",
         build(replace_rec(base, "/data/1", offset=len(ok) - 200)))
    case("unknown_method.pt", "code/__torch__/models.py claims compression method 99.",
         build(replace_rec(base, "/code/__torch__/models.py", method=99, raw=models_py)))
    case("encrypted_flag.pt", "data.pkl has the encryption flag (bit 0) set.",
         build(replace_rec(base, "/data.pkl", flags=0x0801)))

    # Deflate bombs in code/ (the bytes are the same; the first is honest
    # about its 80 MB, the second declares 900 bytes).
    bomb = b"#" * (70 << 20)
    case("bomb_code.pt", "A code/__torch__/bomb.py that inflates to 70 MiB of `#` (honest sizes, ~70 KB stored).",
         build(base + [Rec(top + "/code/__torch__/bomb.py", bomb, 8)]))
    case("bomb_code_lying.pt", "The same 70 MiB deflate bomb declaring 900 uncompressed bytes.",
         build(base + [Rec(top + "/code/__torch__/bomb.py", bomb, 8, usize=900)]))
    case("code_not_utf8.pt", "code/__torch__/models.py with bytes 0xff 0xfe in a comment (not UTF-8).",
         build(replace_rec(base, "/code/__torch__/models.py", data=b"# \xff\xfe\n" + models_py)))

    # Data around the archive; two end records.
    case("junk_before.pt", "1000 bytes of text before the archive; offsets not adjusted.",
         build(base, prefix=b"#!/bin/sh\n" + b"x" * 990))
    case("junk_before_adjusted.pt", "1000 bytes before the archive with every offset adjusted "
         "(a self-extractor's shape: valid to unzip, not to PyTorch).",
         build(base, prefix=b"#!/bin/sh\n" + b"x" * 990, shift=1000))
    case("junk_after.pt", "ok_rebuilt.pt followed by 1000 bytes of text.", ok + b"y" * 1000)
    case("junk_after_in_comment.pt", "ok_rebuilt.pt with 1000 bytes of archive comment (valid ZIP).",
         build(base, comment=b"c" * 1000))
    case("two_archives.pt", "ok_rebuilt.pt followed by testdata/frozen.pt (two end records; "
         "the last one's offsets point into the first archive).",
         ok + open(os.path.join(testdata, "frozen.pt"), "rb").read())
    fake = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, 46, 0, 0)
    case("two_end_records.pt", "The archive comment ends with a second end record (comment length 0) "
         "that points at a one-entry central directory at offset 0.",
         build(base, comment=b"z" * 10 + fake))

    # Files that ZIP readers read differently: what tsarchive checks
    # must be what PyTorch loads, so each is refused (exit 3 everywhere).
    # Archive B (the same record names; data/1 zeroed, other labels) laid out
    # with offsets as if it started right after ok_rebuilt.pt's end record,
    # where it goes as the comment.
    hidden = build(replace_rec(replace_rec(base, "/data/1", data=b"\x00" * 512), "/extra/labels.json",
                               data=b'{"classes": ["not", "what", "was", "verified"]}'), shift=len(ok))
    case("comment_hides_archive.pt", "ok_rebuilt.pt whose archive comment is a whole archive B (same names, "
         "data/1 zeroed, other labels.json) "
         "plus 2 bytes: miniz takes B's end record (the last signature with 22 bytes after it), a reader "
         "that trusts comment lengths takes ok_rebuilt.pt's.", build(base, comment=hidden + b"\0\0"))
    case("comment_is_archive.pt", "ok_rebuilt.pt whose archive comment is exactly archive B: two end records "
         "reach the end of the file.", build(base, comment=hidden))
    case("comment_end_signature.pt", "The archive comment ends with `PK\\5\\6` and 10 bytes (Python's zipfile "
         "takes that signature and fails; miniz skips it).", build(base, comment=b"x" * 8 + b"PK\x05\x06" + b"\0" * 10))
    case("case_twin_data_pkl.pt", "A second module pickle `DATA.pkl` beside data.pkl (miniz finds names "
         "case-insensitively).", build(base + [Rec(top + "/DATA.pkl", pkl(b"N"))]))
    case("case_twin_code.pt", "`CODE/__torch__/models.py` (forward returns its input) beside "
         "code/__torch__/models.py.", build(base + [Rec(top + "/CODE/__torch__/models.py", models_py.replace(
             b"return torch.add(_0, offset)", b"return x"), 8)]))
    case("case_twin_extra.pt", "`extra/LABELS.json` beside extra/labels.json, other content.",
         build(base + [Rec(top + "/extra/LABELS.json", b'{"classes": ["evil"]}')]))
    case("local_method_differs.pt", "data.pkl is stored; its local header says deflated.",
         build(replace_rec(base, "/data.pkl", local_method=8)))
    case("local_encrypted_flag.pt", "data.pkl's local header has the encryption flag, the central one not.",
         build(replace_rec(base, "/data.pkl", local_flags=0x0801)))
    case("local_crc_differs.pt", "data/1's local CRC-32 off by one (flag bit 3 clear).",
         build(replace_rec(base, "/data/1", local_crc=(zlib.crc32(d1.data) + 1) & 0xFFFFFFFF)))
    case("local_sizes_differ.pt", "data/1's local header (flag bit 3 set) says 100 bytes, not zero or 512.",
         build(replace_rec(base, "/data/1", descriptor=True, local_csize=100, local_usize=100)))
    z64 = bytearray(build(base))
    z64_at = len(z64) - 22 - 20 - 56
    assert z64[z64_at:z64_at + 4] == b"PK\x06\x06"
    z64[z64_at:z64_at] = z64[z64_at:z64_at + 56]  # the locator still points at the first copy
    case("zip64_locator_elsewhere.pt", "Two copies of the ZIP64 end record; the locator points at the first, "
         "56 bytes before the one that ends at the locator (miniz reads the first, Python's zipfile the second).",
         bytes(z64))
    gap = bytearray(build(base))
    gap[z64_at:z64_at] = b"g" * 100
    struct.pack_into("<Q", gap, len(gap) - 22 - 20 + 8, z64_at + 100)
    case("gap_before_end_records.pt", "100 bytes between the central directory and the ZIP64 end record (Python's "
         "zipfile takes them for a prefix and shifts every offset; miniz does not).", bytes(gap))
    case("cd_count_short.pt", "Both end records count one entry less than the central directory holds (miniz "
         "reads the count, Python's zipfile the directory's size).", build(base, entry_count=len(base) - 1))
    classic = bytearray(build(base))
    struct.pack_into("<HH", classic, len(classic) - 22 + 8, len(base) - 1, len(base) - 1)
    case("zip64_classic_disagrees.pt", "The classic end record counts one entry less than the ZIP64 end record "
         "(readers without ZIP64 see another directory).", bytes(classic))
    # The same lies as bad_crc_data_pkl.pt, usize_too_small.pt and
    # bomb_code_lying.pt, made in the central directory only, with PyTorch
    # 1.13's local headers (bit 3, zeros): the content reader must refuse them.
    case("bad_crc_data_pkl_descriptor.pt", "bad_crc_data_pkl.pt with PyTorch's local headers (flag bit 3, "
         "zero CRC and sizes, data descriptors).",
         build(with_descriptors(replace_rec(base, "/data.pkl", data=bytes(flipped),
                                            crc=zlib.crc32(data_pkl) & 0xFFFFFFFF))))
    case("usize_too_small_descriptor.pt", "usize_too_small.pt with PyTorch's local headers.",
         build(with_descriptors(replace_rec(base, "/data/1", usize=100))))
    case("bomb_code_lying_descriptor.pt", "bomb_code_lying.pt with PyTorch's local headers.",
         build(with_descriptors(base + [Rec(top + "/code/__torch__/bomb.py", bomb, 8, usize=900)])))

    # Version records.
    case("version_missing.pt", "No `version` record.", build(drop_rec(base, "/version")))
    case("version_not_a_number.pt", "`version` holds `three`.",
         build(replace_rec(base, "/version", data=b"three")))
    case("version_too_new.pt", "`version` holds 99.", build(replace_rec(base, "/version", data=b"99\n")))
    case("version_zero.pt", "`version` holds 0.", build(replace_rec(base, "/version", data=b"0\n")))
    case("version_negative.pt", "`version` holds -3.", build(replace_rec(base, "/version", data=b"-3\n")))
    case("version_huge.pt", "`version` holds a 30-digit number.",
         build(replace_rec(base, "/version", data=b"9" * 30)))
    case("version_disagree.pt", "`version` says 3, `.data/version` says 99.",
         build(base + [Rec(top + "/.data/version", b"99\n")]))
    case("version_disagree_in_range.pt", "`version` says 3, `.data/version` says 6 (both readable, "
         "they contradict each other).", build(base + [Rec(top + "/.data/version", b"6\n")]))

    # Missing and short records.
    case("missing_data_pkl.pt", "No data.pkl.", build(drop_rec(base, "/data.pkl")))
    case("missing_constants_pkl.pt", "No constants.pkl.", build(drop_rec(base, "/constants.pkl")))
    case("missing_data_record.pt", "No data/3 (data.pkl still refers to it).", build(drop_rec(base, "/data/3")))
    case("short_data_record.pt", "data/1 cut from 512 to 100 bytes, sizes and CRC consistent.",
         build(replace_rec(base, "/data/1", data=d1.data[:100])))
    case("empty_data_record.pt", "data/1 is 0 bytes, sizes and CRC consistent.",
         build(replace_rec(base, "/data/1", data=b"")))

    # Pickles.
    case("pkl_truncated.pt", "data.pkl cut in half (sizes and CRC consistent).",
         build(replace_rec(base, "/data.pkl", data=data_pkl[: len(data_pkl) // 2])))
    case("pkl_unknown_opcode.pt", "data.pkl with opcode 0xff after PROTO.",
         build(replace_rec(base, "/data.pkl", data=data_pkl[:2] + b"\xff" + data_pkl[2:])))
    case("pkl_inst_opcode.pt", "data.pkl is an INST opcode calling os.system (code execution in Python's pickle).",
         build(replace_rec(base, "/data.pkl", data=b"(S'echo pwned'\nios\nsystem\n.")))
    case("pkl_lying_length.pt", "data.pkl starts with BINUNICODE claiming 0x7fffffff bytes.",
         build(replace_rec(base, "/data.pkl", data=pkl(b"X\xff\xff\xff\x7fabc"))))
    case("pkl_lying_length8.pt", "data.pkl starts with BINBYTES8 claiming 2**62 bytes.",
         build(replace_rec(base, "/data.pkl", data=pkl(b"\x8e" + struct.pack("<Q", 1 << 62)))))
    case("pkl_memo_bomb.pt", "data.pkl is a list holding the previous list twice, 60 levels deep via memo "
         "references (2**60 leaves if expanded).", build(replace_rec(base, "/data.pkl", data=memo_bomb(60))))
    case("pkl_memo_long_paths.pt", "data.pkl holds one tensor at the bottom of 40 dicts, each holding the one "
         "below under two 100-byte keys through the memo (2**40 paths to it, each 4 KiB long).",
         build(replace_rec(base, "/data.pkl", data=memo_long_paths(40, 100))))
    case("pkl_deep_nesting.pt", "data.pkl is 1000000 lists nested in each other (deflated, which ZIP allows).",
         build(replace_rec(base, "/data.pkl", data=deep_nesting(1000000), method=8)))
    case("pkl_node_flood.pt", "data.pkl is 20000000 empty lists appended into one (a 20 KB file; one value per "
         "byte, 5 GB in a reader that does not cap them).",
         build(replace_rec(base, "/data.pkl", data=pkl(b"]", b"(", b"]" * 20000000, b"e"), method=8)))
    case("pkl_self_cycle.pt", "data.pkl is a list that contains itself.",
         build(replace_rec(base, "/data.pkl", data=self_cycle())))
    assert data_pkl.count(b"h\x06K\x80t") == 1 and data_pkl.count(b"(K\x10K\x08t") == 1
    huge_storage = data_pkl.replace(b"h\x06K\x80t", b"h\x06\x8a\x08" + struct.pack("<q", 1 << 61) + b"t")
    case("pkl_huge_numel.pt", "data.pkl's storage data/1 declares 2**61 float elements "
         "(its record holds 512 bytes).", build(replace_rec(base, "/data.pkl", data=huge_storage)))
    huge_sizes = data_pkl.replace(b"(K\x10K\x08t", b"(J\x00\x00\x00\x40J\x00\x00\x00\x40t")
    case("pkl_huge_sizes.pt", "data.pkl gives encoder.0.weight the size (2**30, 2**30) over its "
         "128-element storage (stride left at (8, 1)).", build(replace_rec(base, "/data.pkl", data=huge_sizes)))
    case("constants_pkl_truncated.pt", "constants.pkl is only the PROTO opcode.",
         build(replace_rec(base, "/constants.pkl", data=b"\x80\x02")))
    case("constants_pkl_garbage.pt", "constants.pkl is 64 random bytes.",
         build(replace_rec(base, "/constants.pkl", data=bytes(rnd.getrandbits(8) for _ in range(64)))))

    # code/ edits that crash libtorch 1.13 (torch::jit::load SEGFAULTs).
    case("renamed_parameters.pt", "`__parameters__` renamed to `__paramXters__` in code/__torch__/torch/nn/"
         "modules/linear.py (SEGFAULTs torch::jit::load in libtorch 1.13).",
         build(replace_rec(base, "/code/__torch__/torch/nn/modules/linear.py",
                           data=linear_py.replace(b"__parameters__", b"__paramXters__"))))
    case("renamed_buffers.pt", "`__buffers__` renamed to `__bufferX__` in code/__torch__/torch/nn/modules/"
         "linear.py (SEGFAULTs torch::jit::load in libtorch 1.13).",
         build(replace_rec(base, "/code/__torch__/torch/nn/modules/linear.py",
                           data=linear_py.replace(b"__buffers__", b"__bufferX__"))))

    # Lite-interpreter archive.
    case("ptl_bytecode_truncated.ptl", "mlp.ptl with bytecode.pkl cut in half.",
         build(replace_rec(lite, "/bytecode.pkl", data=bytecode[: len(bytecode) // 2])))
    case("ptl_bytecode_version_huge.ptl", "mlp.ptl whose bytecode.pkl declares bytecode version 2**40.",
         build(replace_rec(lite, "/bytecode.pkl",
                           data=b"\x80\x02\x8a\x06" + struct.pack("<q", 1 << 40)[:6] + bytecode[4:])))
    assert bytecode.startswith(b"\x80\x02K\x08")
    case("ptl_truncated.ptl", "mlp.ptl cut in half.", build(lite)[: len(build(lite)) // 2])

    # JSON and text from archives that reach parsers and terminals.
    deep = b"[" * 100000 + b"]" * 100000
    case("extra_json_deep.pt", "ok_rebuilt.pt plus an extra file `deep.json`: 100000 nested empty JSON arrays (nlohmann's "
         "serializer recursed once per level and crashed `extra list`, `inspect`, `verify`, `stamp`, `run`).",
         build(base + [Rec(top + "/extra/deep.json", deep)]))
    case("stamp_json_deep.pt", "ok_rebuilt.pt plus an `extra/producer_info.json` (the stamp) of 100000 nested empty JSON arrays.",
         build(base + [Rec(top + "/extra/producer_info.json", deep)]))
    case("name_control_chars.pt", "ok_rebuilt.pt plus extra files named `red\\x1b[31mtext`, `fake\\rrow` and "
         "`two\\nlines` (ESC, CR, LF; UTF-8 flag clear): raw on a terminal they recolour it and fake rows.",
         build(base + [Rec(top + "/extra/red\x1b[31mtext", b"x\n", flags=0),
                       Rec(top + "/extra/fake\rrow", b"y\n", flags=0),
                       Rec(top + "/extra/two\nlines", b"z\n", flags=0)]))
    case("extra_terminal_controls.pt", "ok_rebuilt.pt plus an extra file `notes.txt` whose text has a CR, "
         "U+009B (the C1 form of ESC [) and U+202E (right-to-left override).",
         build(base + [Rec(top + "/extra/notes.txt",
                           "cat\rdog \u009b2J fake \u202eevil.txt\n".encode("utf-8"))]))

    case("name_not_utf8.pt", "ok_rebuilt.pt plus an extra file named `bad\\xffname` (byte 0xff: not UTF-8, "
         "UTF-8 flag clear): ZIP readers decode it differently (Python's zipfile as CP437), so it is refused.",
         build(base + [Rec(top + "/extra/bad\udcffname", b"x\n", flags=0)]))

    # .pt2 archives: edits of testdata/pt2/mlp_dynamic.pt2 (make_testdata_pt2.py, torch 2.13).
    pt2 = read_recs(os.path.join(testdata, "pt2", "mlp_dynamic.pt2"))
    pt2_top = pt2[0].name.split("/")[0]

    def pt2_with(suffix, data, method=0):
        return build(replace_rec(pt2, suffix, data=data, method=method))

    case("pt2_json_bomb.pt2", "mlp_dynamic.pt2 whose `models/model.json` is 100000 nested empty JSON arrays (deflated).",
         pt2_with("/models/model.json", deep, method=8))
    case("pt2_json_huge_string.pt2", "mlp_dynamic.pt2 whose `data/weights/model_weights_config.json` is a 17 MiB "
         "JSON string, deflated (above the 16 MiB limit for configs).",
         pt2_with("/data/weights/model_weights_config.json", b'"' + b"a" * (17 << 20) + b'"', method=8))
    huge = ('{"config": {"fc1.weight": {"path_name": "weight_0", "is_param": true, "use_pickle": false, '
            '"tensor_meta": {"dtype": 7, "sizes": [{"as_int": 4294967296}, {"as_int": 4294967296}], '
            '"requires_grad": true, "device": {"type": "cpu", "index": null}, "strides": [{"as_int": 4294967296}, '
            '{"as_int": 1}], "storage_offset": {"as_int": 0}, "layout": 7}}}}')
    case("pt2_huge_shape.pt2", "mlp_dynamic.pt2 whose weights config declares fc1.weight as 2^32 x 2^32 float32 "
         "(2^66 bytes: overflows 64 bits).", pt2_with("/data/weights/model_weights_config.json", huge.encode()))
    case("pt2_weight_path_escape.pt2", "mlp_dynamic.pt2 whose weights config names `../../models/model.json` as "
         "fc1.weight's record.",
         pt2_with("/data/weights/model_weights_config.json",
                  b'{"config": {"fc1.weight": {"path_name": "../../models/model.json", "is_param": true}}}'))
    aoti = "data/aotinductor/"
    case("pt2_aoti_odd_names.pt2", "mlp_dynamic.pt2 plus AOTInductor records with odd names: a file directly "
         "under `data/aotinductor/` (no model folder), a model folder named `red\x1b[31m` (ESC, UTF-8 flag clear) "
         "and a `_metadata.json` that is not JSON.",
         build(pt2 + [Rec(pt2_top + "/" + aoti + "loose.so", b"\x7fELF", flags=0),
                      Rec(pt2_top + "/" + aoti + "red\x1b[31m/model.wrapper.so", b"\x7fELF", flags=0),
                      Rec(pt2_top + "/" + aoti + "model/model.wrapper_metadata.json", b"{not json")]))
    program = next(r for r in pt2 if r.name.endswith("/models/model.json"))
    case("pt2_hidden_program.pt2", "mlp_dynamic.pt2 plus a second program as `models/sub/model.json` "
         "(torch.export.load loads every record under `models/` as a program).",
         build(pt2 + [Rec(pt2_top + "/models/sub/model.json", program.data)]))

    # The plain ZIP, last as before.
    return cases


def plain_zip(path):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in (("hello.txt", "hello, world\n"),
                           ("notes/readme.txt", "A plain ZIP, not made by PyTorch.\n")):
            # Fixed timestamp so the file is byte-identical between runs.
            zf.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), text,
                        compress_type=zipfile.ZIP_DEFLATED)


def update_readme(testdata, lines):
    """Replaces the `hostile/` lines of testdata/README.md's file list."""
    path = os.path.join(testdata, "README.md")
    with open(path) as f:
        old = f.read().split("\n")
    kept, at = [], None
    for line in old:
        if line.startswith("- `hostile/"):
            if at is None:
                at = len(kept)
            continue
        kept.append(line)
    if at is None:  # no hostile lines yet: end of the Files list
        at = kept.index("## Notes") - 1
    kept[at:at] = lines
    with open(path, "w") as f:
        f.write("\n".join(kept))


def main():
    testdata = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO_ROOT, "testdata"))
    outdir = os.path.join(testdata, "hostile")
    os.makedirs(outdir, exist_ok=True)
    cases = make_cases(testdata)
    names = [c[0] for c in cases] + ["plain_zip.zip"]
    assert len(set(names)) == len(names)
    for name, _, data in cases:
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)
    plain_zip(os.path.join(outdir, "plain_zip.zip"))
    for stale in sorted(set(os.listdir(outdir)) - set(names)):
        os.remove(os.path.join(outdir, stale))
    lines = ["- `hostile/%s`: %s" % (name, text) for name, text, _ in cases]
    lines.append("- `hostile/plain_zip.zip`: A ZIP from Python's zipfile with two text files, not PyTorch.")
    update_readme(testdata, lines)
    total = sum(os.path.getsize(os.path.join(outdir, n)) for n in names)
    print("wrote %d hostile files (%d bytes) to %s" % (len(names), total, outdir))


if __name__ == "__main__":
    main()
