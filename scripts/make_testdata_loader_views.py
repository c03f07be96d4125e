#!/usr/bin/env python3
"""Makes the loader-view files of testdata/: files where tsarchive once read one
thing and a PyTorch loader reads another.

    python3 scripts/make_testdata_loader_views.py            # needs both local PyTorches (below)
    python3 scripts/make_testdata_loader_views.py --prove    # also load every file with both

Three artifacts come from real writers, each made in a temporary directory by a
subprocess: a TorchScript module whose __setstate__ (which torch.jit.load runs)
calls torch.save, scripted and saved by PyTorch 1.13 (/usr/bin/python3), the
same module saved for the lite interpreter by 1.13, and
an ExportedProgram serialized by PyTorch 2.13 (.venv/bin/python) for the
layout torch.export.save wrote before the .pt2 archive. Everything else is
written here: pickles opcode by opcode (the writers of
make_testdata_loadsafety.py; nothing here unpickles them), ZIPs with the
zipfile module (stored, dated 1980-01-01), tar headers with tarfile, and
0.1.x tar files with the writers of make_testdata_legacy_tar.py. The
payloads are harmless and relative: the pickles run
`touch tsarchive_marker_<file>`, the TorchScript code runs
torch.save(w, "tsarchive_marker_<file>"), both in the current directory;
`--prove` loads each file in a fresh temporary directory, says which loader
wrote the marker, and what `build/tsarchive verify FILE` exits with.

loadsafety/evil/ (tsarchive verify: 8, unsafe)
    view_pt2_data_pkl.pt2        testdata/pt2/buffers_consts.pt2 plus the record
                                 buffers_consts/data.pkl, a pickle that runs the payload.
                                 tsarchive read a .pt2 (weights, constants, sample inputs);
                                 torch.load reads the archive as a torch.save file: data.pkl.
    view_legacy_then_export_zip.pt2
                                 benign/torch2_13/legacy.pth (a pre-1.6 pickle stream), then a
                                 ZIP in the layout of early torch.export.save (version,
                                 serialized_exported_program.json, serialized_*.pt at the root;
                                 its offsets count from its own start, as zipfile allows) whose
                                 serialized_state_dict.pt and serialized_constants.pt are pickles
                                 that run the payload. tsarchive read the legacy stream (benign);
                                 torch.export.load (2.13) falls back to zipfile, which finds the
                                 ZIP by its end record, and torch.loads the constants.
    view_legacy_then_jit_zip.pt  legacy.pth, then the TorchScript archive with its offsets moved
                                 past the prefix. tsarchive read the legacy stream; torch.jit.load
                                 (miniz) finds the archive by its end record and runs __setstate__.
    view_tar_member_jit_zip.pt   benign/tar_tensors.pt (a PyTorch 0.1.x tar) with a fifth member
                                 'model.zip': the TorchScript archive, offsets moved to where it
                                 lies in the file. tsarchive read the tar (torch.load reads
                                 it the same way); torch.jit.load reads the ZIP inside.
    view_code_upper_case.pt      the TorchScript archive with code/ spelled CODE/. tsarchive found
                                 no code/ and scanned no code; torch.jit.load and torch.load
                                 (which hands it to torch.jit.load) find records case-insensitively.
    view_pt2_sample_inputs_upper_case.pt2
                                 buffers_consts.pt2 with data/sample_inputs/model.pt renamed
                                 MODEL.pt and replaced by a torch.save ZIP whose data.pkl runs the
                                 payload. tsarchive looked up the exact name, found nothing and
                                 scanned nothing; torch.export.load (2.13) reads it through miniz,
                                 case-insensitively, and falls back to weights_only=False.
    view_legacy_then_zip_past_64k.pt
                                 view_legacy_then_jit_zip.pt followed by 67000 zero bytes: the
                                 end record lies 67022 bytes before the end of the file. tsarchive
                                 looked for one in the last 65557 bytes (the largest comment plus
                                 the record), found none and read the legacy stream; miniz
                                 (torch.jit.load) searches back in 4 KiB reads to about 69.6 KB,
                                 finds the archive and runs __setstate__.
    view_legacy_then_zip64_sizes.pt
                                 legacy.pth, then the relocated TorchScript archive with a ZIP64
                                 end record and locator before its classic end record, whose
                                 directory size says 0xFFFFFFFE. tsarchive took that size (larger
                                 than the directory's offset) for no end record and read the legacy
                                 stream; miniz (torch.jit.load) takes the size and offset from the
                                 ZIP64 records and runs __setstate__.
    view_legacy_then_zip_directory_after_end.pt
                                 legacy.pth, then an end record, then the TorchScript archive's
                                 central directory (made longer than the end record's offset by
                                 a comment on its first entry), then its local records. tsarchive
                                 wanted the directory before the end record, found none and read
                                 the legacy stream; miniz (torch.jit.load) only wants offset + size
                                 within the file, and runs __setstate__.
    view_ptl_bytecode_save.ptl   the Saver saved for the lite interpreter (1.13), its code/ without the
                                 torch.save line; bytecode.pkl's operator table still holds aten::save
                                 and __setstate__'s instructions call it. tsarchive once scanned only
                                 code/; _load_for_lite_interpreter runs bytecode.pkl.
    view_ptl_bytecode_custom_op.ptl
                                 the same with aten::save renamed tsarchive_custom_ns::save: an
                                 operator of a namespace named only in bytecode.pkl. No loader has
                                 it, so no marker: --prove checks only tsarchive's exit.
    view_pt2_plus_torchscript.pt2
                                 buffers_consts.pt2 with sample inputs that run the payload, plus the
                                 TorchScript Saver's records in the same folder. tsarchive once took
                                 it for TorchScript only; torch.export.load (2.13) reads the .pt2 and
                                 torch.loads the sample inputs.
    view_code_upper_py.pt        the TorchScript archive with its code/ records ending .PY. tsarchive
                                 once scanned only names ending .py; torch.jit.load runs __setstate__.
    view_opaque_object_constants.pt
                                 benign/torch2_13/scripted.pt whose constants.pkl holds an object of
                                 __torch__.torch.classes.aten.OpaqueObject, libtorch_python's custom
                                 class (2.x) whose __setstate__ is pickle.loads(b64decode(state)); its
                                 state is a pickle that runs the payload. tsarchive skipped every
                                 __torch__ global of a TorchScript pickle, custom classes too;
                                 torch.jit.load (2.13) runs the inner pickle.
    view_opaque_object_data.ptl  torch2/mlp.ptl with that object as one more entry of the module's
                                 state in data.pkl: _load_for_lite_interpreter (2.13) runs it.
    view_opaque_object_custom_obj.pt2
                                 buffers_consts.pt2 with one more constant, data/constants/custom_obj_0,
                                 a torch._C._pickle_save container of that object: torch.export.load
                                 (2.13) reads it with TorchScript's unpickler and runs it.
    view_constants_upper_case.pt a torch.save-shaped ZIP with data.pkl and CONSTANTS.pkl. tsarchive
                                 found CONSTANTS.pkl ignoring case (as torch.jit.load does) and judged
                                 data.pkl by TorchScript's rules, under which torch.classes.quantized.*
                                 names libtorch's own classes; torch.load looks for constants.pkl by
                                 its exact name, reads the file as a torch.save file and unpickles
                                 data.pkl with Python's pickle, which follows
                                 torch.classes.quantized.__getattr__.__builtins__.get to exec.
    view_pt2_graph_from_file.pt2
                                 buffers_consts.pt2 whose graph calls, before its linear layer,
                                 torch.ops.aten.from_file.default(filename, shared=True, size=2).
                                 tsarchive judged a .pt2's pickles and shared libraries, never
                                 its graph; the module torch.export.load (2.13) makes creates
                                 the file when it runs.
    view_aoti_cpp_compile.pt2    an AOTInductor package whose model has no .so, only a .cpp and
                                 the flags files it is built with, the compiler given as
                                 `touch <marker>; true`. tsarchive judged only .so files;
                                 aoti_load_package (2.13) compiles the .cpp with system().
    view_string_escape_global.pkl
                                 STACK_GLOBAL on protocol 0 STRINGs 'p\\x6fsix' and 'system'.
                                 tsarchive kept the escapes (an unlisted p\\x6fsix.system, which
                                 --allow-global could name); pickle.load unescapes: posix.system.
    view_wildcard_dotted.pkl     protocol 4, GLOBAL mymodel + 'os.system': pickle.load follows the
                                 name attribute by attribute (mymodel's `import os`). tsarchive let
                                 --allow-global 'mymodel.*' pass it. No mymodel module here: --prove
                                 checks only tsarchive's exit.
    view_tar_frame_past_stop.pt  a 0.1.x tar (make_testdata_legacy_tar.py's members) whose
                                 'storages' member holds a protocol 4 pickle (key, location,
                                 class) with a FRAME running past its STOP over an int64 element
                                 count. tsarchive read that count after STOP, skipped as raw
                                 data the bytes that follow and read a benign storage views
                                 pickle; torch.load (weights_only=False) reads the extracted
                                 member unbuffered, so the unpickler consumes the whole frame:
                                 it reads the count 0 after it, then, as the views pickle, the
                                 one tsarchive skipped, which runs the payload.
    view_legacy_frame_past_stop.pth
                                 legacy.pth with a FRAME after the magic number (in its first
                                 pickle) that holds its STOP and the rest of legacy.pth, then a
                                 pickle that runs the payload and gives protocol version 1001.
                                 tsarchive read legacy.pth's pickles after that STOP (benign);
                                 torch.load of an io.BytesIO (weights_only=False; no peek(),
                                 so the unpickler consumes the whole frame) reads the pickle
                                 after the frame as the protocol version, and runs it.
    view_pt2_graph_targets.pt2   buffers_consts.pt2 with one more node, a torch.ops.higher_order.cond
                                 whose branch graph calls 'torch.os.system' (torch.export.load's
                                 deserialize_operator resolves it attribute by attribute from torch)
                                 and whose other argument is the operator tsarchive_custom_ns::op
                                 (as_operator). Targets torch.export never writes, inside sub-graphs;
                                 2.13's verifier refuses os.system, so --prove checks only the exit.
    view_unicode_latin1_key.pt   a torch.save file whose storage key is protocol 0's UNICODE 'V'
                                 of bytes c3 a9: pickle decodes them as raw-unicode-escape, each byte
                                 one Latin-1 character, so torch.load reads data/\u00c3\u00a9
                                 (other values), while tsarchive read data/\u00e9 (also there). Nothing
                                 runs: --prove checks only tsarchive's exit.
hostile/ (tsarchive verify: 3, crafted)
    long_name_truncated.pth      a torch.save-shaped archive under a 497-character folder with
                                 a benign data.pkl, and the records constants.pklXYZ (benign),
                                 CONSTANTS.pkl + CONSTANTS/0 (the TorchScript module) and
                                 CODE/__torch__.py. miniz keeps 511 bytes of a name, so
                                 'constants.pklXYZ' lists as 'constants.pkl': torch.load takes the
                                 file for TorchScript and hands it to torch.jit.load, which finds
                                 CONSTANTS.pkl and CODE/ case-insensitively and runs __setstate__.
                                 tsarchive read a torch.save file with a benign data.pkl.
    view_zip_flatbuffer_polyglot.pt
                                 benign/torch2_13/scripted.pt moved 8 bytes on, after 'PK\\3\\4PTMF':
                                 libtorch's getFileFormat() takes a file whose bytes 4 to 7 are
                                 PTMF for a mobile flatbuffer model before it looks for a ZIP, so
                                 torch.jit.load, torch.load and the lite loader read it as one (this
                                 one is no valid flatbuffer and fails; /tmp's 67 MB original runs its
                                 own); tsarchive judged the ZIP. No marker: --prove checks the exit.

Inputs (tracked): testdata/pt2/buffers_consts.pt2, loadsafety/benign/torch2_13/legacy.pth,
loadsafety/benign/tar_tensors.pt, loadsafety/benign/torch2_13/scripted.pt, torch2/mlp.ptl. Output is byte-for-byte the same run to run.
"""
import base64
import hashlib
import io
import json
import os
import pickle as P
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
ROOT = os.path.join(REPO, "testdata")
PYTHONS = [("torch1.13", "/usr/bin/python3"), ("torch2.13", os.path.join(REPO, ".venv", "bin", "python"))]
TSARCHIVE = os.path.join(REPO, "build", "tsarchive")

PT2 = os.path.join(ROOT, "pt2", "buffers_consts.pt2")
LEGACY = os.path.join(ROOT, "loadsafety", "benign", "torch2_13", "legacy.pth")
TAR = os.path.join(ROOT, "loadsafety", "benign", "tar_tensors.pt")
SCRIPTED = os.path.join(ROOT, "loadsafety", "benign", "torch2_13", "scripted.pt")
MOBILE = os.path.join(ROOT, "torch2", "mlp.ptl")

DATE = (1980, 1, 1, 0, 0, 0)
MTIME = 1493164800          # the tar members' time in tar_tensors.pt
MARKER = "tsarchive_marker_"

FILES = {  # output -> expected `tsarchive verify` exit
    "loadsafety/evil/view_pt2_data_pkl.pt2": 8,
    "loadsafety/evil/view_legacy_then_export_zip.pt2": 8,
    "loadsafety/evil/view_legacy_then_jit_zip.pt": 8,
    "loadsafety/evil/view_tar_member_jit_zip.pt": 8,
    "loadsafety/evil/view_code_upper_case.pt": 8,
    "loadsafety/evil/view_pt2_sample_inputs_upper_case.pt2": 8,
    "hostile/long_name_truncated.pth": 3,
    "loadsafety/evil/view_legacy_then_zip_past_64k.pt": 8,
    "loadsafety/evil/view_legacy_then_zip64_sizes.pt": 8,
    "loadsafety/evil/view_legacy_then_zip_directory_after_end.pt": 8,
    "loadsafety/crafted/view_tar_frame_past_stop.pt": 8,
    "loadsafety/crafted/view_legacy_frame_past_stop.pth": 8,
    "loadsafety/evil/view_ptl_bytecode_save.ptl": 8,
    "loadsafety/evil/view_ptl_bytecode_custom_op.ptl": 8,
    "loadsafety/evil/view_pt2_plus_torchscript.pt2": 8,
    "loadsafety/evil/view_code_upper_py.pt": 8,
    "loadsafety/evil/view_opaque_object_constants.pt": 8,
    "loadsafety/evil/view_opaque_object_data.ptl": 8,
    "loadsafety/evil/view_opaque_object_custom_obj.pt2": 8,
    "loadsafety/evil/view_constants_upper_case.pt": 8,
    "loadsafety/evil/view_pt2_graph_from_file.pt2": 8,
    "loadsafety/evil/view_aoti_cpp_compile.pt2": 8,
    "loadsafety/evil/view_string_escape_global.pkl": 8,
    "loadsafety/evil/view_wildcard_dotted.pkl": 8,
    "loadsafety/crafted/view_unicode_latin1_key.pt": 8,
    "loadsafety/crafted/view_pt2_graph_targets.pt2": 8,
    "hostile/view_zip_flatbuffer_polyglot.pt": 3,
}
NO_MARKER = {  # no loader runs it here: prove the exit only
    "loadsafety/evil/view_ptl_bytecode_custom_op.ptl", "loadsafety/evil/view_wildcard_dotted.pkl",
    "loadsafety/crafted/view_unicode_latin1_key.pt", "loadsafety/crafted/view_pt2_graph_targets.pt2",
    "hostile/view_zip_flatbuffer_polyglot.pt"}

sys.path.insert(0, HERE)
from make_testdata_loadsafety import call, glob, proto, ustr  # noqa: E402,F401  (one set of opcode writers)
from make_testdata_legacy_tar import ROOT_STORAGE, member, pint, pkl, sys_info  # noqa: E402  (0.1.x tar)
from make_testdata_legacy_tar import tar as tar_file  # noqa: E402
from make_testdata_legacy_tar import system as system_popped  # noqa: E402  (os.system(...), POP: no STOP)


# ---- artifacts from the real writers ------------------------------------------

SAVER = r'''
import sys
from typing import Tuple
import torch


class Saver(torch.nn.Module):
    """Its __setstate__, which torch.jit.load runs, writes a file with torch.save (aten::save)."""

    def __init__(self):
        super().__init__()
        self.w = torch.ones(2)

    def forward(self, x):
        return x + self.w

    @torch.jit.export
    def __getstate__(self):
        return (self.w, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, bool]):
        self.w = state[0]
        self.training = state[1]
        torch.save(self.w, "tsarchive_marker_" + "NAME")


torch.jit.script(Saver()).save(sys.argv[1])
'''

# The same module for the lite interpreter (1.13): bytecode.pkl holds the methods' instructions,
# operator table (aten::save for __setstate__) and constants; _load_for_lite_interpreter runs them.
LITE = SAVER.replace(".save(sys.argv[1])", "._save_for_lite_interpreter(sys.argv[1])")
assert LITE != SAVER

EXPORT = r'''
import sys
import torch
from torch._export.serde.serialize import serialize


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.l(x)


torch.manual_seed(0)
a = serialize(torch.export.export(M(), (torch.ones(1, 2),)))
open(sys.argv[1] + "/serialized_exported_program.json", "wb").write(a.exported_program)
open(sys.argv[1] + "/serialized_example_inputs.pt", "wb").write(a.example_inputs)
'''


def run_python(python, source, tmp, *args):
    script = os.path.join(tmp, "writer.py")
    with open(script, "w") as f:
        f.write(source)
    r = subprocess.run([python, script, *args], cwd=tmp, capture_output=True, text=True)
    if r.returncode:
        sys.exit("%s failed:\n%s" % (python, r.stderr[-2000:]))


def artifacts():
    """The TorchScript Saver's records {name under its folder: bytes} (1.13), and the
    export JSON and example inputs (2.13)."""
    with tempfile.TemporaryDirectory(prefix="tsarchive_views_") as tmp:
        run_python(PYTHONS[0][1], SAVER, tmp, os.path.join(tmp, "saver.pt"))
        with zipfile.ZipFile(os.path.join(tmp, "saver.pt")) as z:
            saver = {n.split("/", 1)[1]: z.read(n) for n in z.namelist() if not n.endswith(".debug_pkl")}
        run_python(PYTHONS[0][1], LITE, tmp, os.path.join(tmp, "saver.ptl"))
        with zipfile.ZipFile(os.path.join(tmp, "saver.ptl")) as z:
            lite = {n.split("/", 1)[1]: z.read(n) for n in z.namelist() if not n.endswith(".debug_pkl")}
        run_python(PYTHONS[1][1], EXPORT, tmp, tmp)
        with open(os.path.join(tmp, "serialized_exported_program.json"), "rb") as f:
            program = json.loads(f.read())
        with open(os.path.join(tmp, "serialized_example_inputs.pt"), "rb") as f:
            example_inputs = f.read()
    assert b"tsarchive_marker_NAME" in saver["code/__torch__.py"], saver["code/__torch__.py"]
    # Stack traces name the writer's temporary path and the venv: drop them.
    for node in program["graph_module"]["graph"]["nodes"]:
        node.get("metadata", {}).pop("stack_trace", None)
    assert b"tsarchive_marker_NAME" in lite["bytecode.pkl"] and b"aten::save" in lite["bytecode.pkl"], lite
    assert ".data/serialization_id" not in lite, sorted(lite)   # random per save: would break determinism
    return saver, json.dumps(program).encode(), program["schema_version"], example_inputs, lite


# ---- writers ------------------------------------------------------------------

def zip_bytes(records):
    """A ZIP of (name, data) records, stored, in order, with fixed dates and modes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in records:
            info = zipfile.ZipInfo(name, DATE)
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    return out.getvalue()


def zip_records(path):
    with zipfile.ZipFile(path) as z:
        return [(n, z.read(n)) for n in z.namelist()]


def relocate(z, delta):
    """Adds delta to every offset of a ZIP (no ZIP64), so that it can sit at file offset delta."""
    z = bytearray(z)
    e = z.rfind(b"PK\x05\x06")
    n, cd_size, cd_offset = struct.unpack_from("<HII", z, e + 10)
    shift_local_offsets(z, cd_offset, n, delta)
    struct.pack_into("<I", z, e + 16, cd_offset + delta)
    return bytes(z)


def shift_local_offsets(z, p, n, delta):
    """Adds delta to the local-header offset of the n central-directory entries at z[p:] (a bytearray)."""
    for _ in range(n):
        assert z[p:p + 4] == b"PK\x01\x02"
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", z, p + 28)
        local, = struct.unpack_from("<I", z, p + 42)
        struct.pack_into("<I", z, p + 42, local + delta)
        p += 46 + name_len + extra_len + comment_len


def zip64_sizes(z, base):
    """ZIP z (which sits at file offset base) with a ZIP64 end record and locator put before its
    end record, whose directory size becomes 0xFFFFFFFE; the ZIP64 record holds the real values."""
    e = z.rfind(b"PK\x05\x06")
    n, cd_size, cd_offset = struct.unpack_from("<HII", z, e + 10)
    z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, base + e, 1)
    end = bytearray(z[e:e + 22])
    struct.pack_into("<I", end, 12, 0xFFFFFFFE)
    return z[:e] + z64 + locator + bytes(end)


def directory_after_end(prefix, records):
    """prefix, an end record, the central directory of records, their local records. The first entry's
    comment makes the directory longer than the end record's offset (the length of prefix + 22)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for i, (name, data) in enumerate(records):
            info = zipfile.ZipInfo(name, DATE)
            info.external_attr = 0o644 << 16
            if i == 0:
                info.comment = b"c" * (len(prefix) + 200)
            z.writestr(info, data)
    z = out.getvalue()
    e = z.rfind(b"PK\x05\x06")
    n, cd_size, cd_offset = struct.unpack_from("<HII", z, e + 10)
    local, cd, end = z[:cd_offset], bytearray(z[cd_offset:e]), bytearray(z[e:e + 22])
    shift_local_offsets(cd, 0, n, len(prefix) + 22 + len(cd))
    struct.pack_into("<I", end, 16, len(prefix) + 22)
    assert cd_size > len(prefix) + 22
    return prefix + bytes(end) + bytes(cd) + local


def framed(body, hidden):
    """A protocol 4 pickle of body whose FRAME runs past its STOP over hidden."""
    content = body + P.STOP + hidden
    return P.PROTO + b"\x04" + P.FRAME + struct.pack("<Q", len(content)) + content


def system(fname):
    """A protocol 2 pickle of os.system('touch tsarchive_marker_<fname>')."""
    return proto() + call("os", "system", ustr("touch " + MARKER + fname)) + P.STOP


def opaque_object(fname):
    """An object of libtorch_python's custom class aten.OpaqueObject (PyTorch 2.x) as TorchScript's
    pickler writes one: its __setstate__ is pickle.loads(base64.b64decode(state)), and state is system()."""
    state = base64.b64encode(system(fname)).decode()
    return glob("__torch__.torch.classes.aten", "OpaqueObject") + P.EMPTY_TUPLE + P.NEWOBJ + ustr(state) + P.BUILD


def saver_records(saver, fname, top="archive", code="code/"):
    """The TorchScript Saver under top/, its marker named for fname, its code/ folder spelled code."""
    out = []
    for rel, data in saver.items():
        if rel.startswith("code/"):
            data = data.replace(b"tsarchive_marker_NAME", (MARKER + fname).encode())
            rel = code + rel[len("code/"):]
        out.append((top + "/" + rel, data))
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read()


def lite_records(lite, fname, operator=b"aten::save"):
    """The lite Saver under archive/: code/ without its torch.save line (tsarchive scans code/ for it),
    bytecode.pkl with the marker constant named for fname and aten::save spelled operator."""
    out = []
    for rel, data in lite.items():
        if rel.startswith("code/"):
            data = b"\n".join(line for line in data.split(b"\n") if b"torch.save" not in line)
        elif rel == "bytecode.pkl":
            old = b"X" + struct.pack("<I", 21) + b"tsarchive_marker_NAME"
            new = (MARKER + fname).encode()
            assert data.count(old) == 1 and data.count(b"X\n\x00\x00\x00aten::save") == 1
            data = data.replace(old, b"X" + struct.pack("<I", len(new)) + new)
            data = data.replace(b"X\n\x00\x00\x00aten::save", b"X" + struct.pack("<I", len(operator)) + operator)
        out.append(("archive/" + rel, data))
    return out


def files(saver, program, schema_version, example_inputs, lite):
    out = {}
    name = lambda rel: os.path.basename(rel)
    pt2 = zip_records(PT2)
    top = pt2[0][0].split("/")[0]
    legacy = read(LEGACY)

    rel = "loadsafety/evil/view_pt2_data_pkl.pt2"
    out[rel] = zip_bytes(pt2 + [(top + "/data.pkl", system(name(rel)))])

    rel = "loadsafety/evil/view_legacy_then_export_zip.pt2"
    out[rel] = legacy + zip_bytes([
        ("version", "%d.%d" % (schema_version["major"], schema_version["minor"])),
        ("serialized_exported_program.json", program),
        ("serialized_state_dict.pt", system(name(rel))),
        ("serialized_constants.pt", system(name(rel))),
        ("serialized_example_inputs.pt", example_inputs),
    ])

    rel = "loadsafety/evil/view_legacy_then_jit_zip.pt"
    out[rel] = legacy + relocate(zip_bytes(saver_records(saver, name(rel))), len(legacy))

    rel = "loadsafety/evil/view_tar_member_jit_zip.pt"
    tar = read(TAR)
    with tarfile.open(TAR) as t:
        last = t.getmembers()[-1]
    end = last.offset_data + (last.size + 511) // 512 * 512
    assert tar[end:] == bytes(len(tar) - end), "tar_tensors.pt: not two zero blocks after its members"
    info = tarfile.TarInfo("model.zip")
    info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = MTIME, 0o600, 1000, 1000, "user", "user"
    jit = relocate(zip_bytes(saver_records(saver, name(rel))), end + 512)
    info.size = len(jit)
    out[rel] = (tar[:end] + info.tobuf(tarfile.USTAR_FORMAT) + jit + bytes(-len(jit) % 512) + bytes(1024))

    rel = "loadsafety/evil/view_code_upper_case.pt"
    out[rel] = zip_bytes(saver_records(saver, name(rel), code="CODE/"))

    rel = "loadsafety/evil/view_pt2_sample_inputs_upper_case.pt2"
    evil_inputs = zip_bytes([("archive/data.pkl", system(name(rel))), ("archive/byteorder", "little"),
                             ("archive/version", "3\n")])
    sample = top + "/data/sample_inputs/model.pt"
    assert sample in dict(pt2)
    out[rel] = zip_bytes([(top + "/data/sample_inputs/MODEL.pt", evil_inputs) if n == sample else (n, d)
                          for n, d in pt2])

    rel = "hostile/long_name_truncated.pth"
    long_top = "a" * 497
    assert len(long_top + "/constants.pkl") == 511
    code = saver["code/__torch__.py"].replace(b"tsarchive_marker_NAME", (MARKER + name(rel)).encode())
    out[rel] = zip_bytes([
        (long_top + "/data.pkl", proto() + P.EMPTY_DICT + ustr("w") + P.BININT1 + b"\x01" + P.SETITEM + P.STOP),
        (long_top + "/byteorder", "little"),
        (long_top + "/constants.pklXYZ", proto() + P.EMPTY_TUPLE + P.STOP),
        (long_top + "/CONSTANTS.pkl", saver["data.pkl"]),   # the Saver object: its __setstate__ runs
        (long_top + "/CONSTANTS/0", saver["data/0"]),
        (long_top + "/CODE/__torch__.py", code),
        (long_top + "/version", saver["version"]),
    ])

    rel = "loadsafety/evil/view_legacy_then_zip_past_64k.pt"
    out[rel] = legacy + relocate(zip_bytes(saver_records(saver, name(rel))), len(legacy)) + bytes(67000)

    rel = "loadsafety/evil/view_legacy_then_zip64_sizes.pt"
    out[rel] = legacy + zip64_sizes(relocate(zip_bytes(saver_records(saver, name(rel))), len(legacy)), len(legacy))

    rel = "loadsafety/evil/view_legacy_then_zip_directory_after_end.pt"
    out[rel] = directory_after_end(legacy, saver_records(saver, name(rel)))

    rel = "loadsafety/crafted/view_tar_frame_past_stop.pt"
    # torch reads a count of 0, then this views pickle; tsarchive skipped it as count * 4 bytes of floats.
    torch_part = struct.pack("<q", 0) + pkl(P.EMPTY_LIST, system_popped(name(rel)))
    torch_part += bytes(-len(torch_part) % 4)
    storages = (pkl(pint(1)) +
                framed(pint(ROOT_STORAGE) + ustr("cpu") + glob("torch", "FloatStorage") + P.TUPLE3,
                       struct.pack("<q", len(torch_part) // 4)) +
                torch_part + pkl(P.EMPTY_LIST))
    out[rel] = tar_file(member("sys_info", sys_info()), member("pickle", pkl(P.EMPTY_DICT)),
                        member("tensors", pkl(pint(0))), member("storages", storages))

    rel = "loadsafety/crafted/view_legacy_frame_past_stop.pth"
    assert legacy[14:15] == P.STOP, "legacy.pth: its magic number pickle is not 14 bytes"
    out[rel] = (legacy[:14] + P.FRAME + struct.pack("<Q", len(legacy) - 14) + legacy[14:] +
                pkl(pint(1001), system_popped(name(rel))))

    rel = "loadsafety/evil/view_ptl_bytecode_save.ptl"
    out[rel] = zip_bytes(lite_records(lite, name(rel)))

    rel = "loadsafety/evil/view_ptl_bytecode_custom_op.ptl"
    out[rel] = zip_bytes(lite_records(lite, name(rel), b"tsarchive_custom_ns::save"))

    rel = "loadsafety/evil/view_pt2_plus_torchscript.pt2"
    # buffers_consts.pt2 with sample inputs that run the payload, plus the TorchScript Saver's records
    # under the same folder (those the .pt2 lacks; its version holds .data/version): tsarchive once
    # took it for TorchScript and left the .pt2 parts unjudged; torch.export.load reads the .pt2.
    evil_inputs = zip_bytes([("archive/data.pkl", system(name(rel))), ("archive/byteorder", "little"),
                             ("archive/version", "3\n")])
    have = {n.split("/", 1)[1]: d for n, d in pt2}
    ts = [(top + "/" + r, have[".data/version"] if r == "version" else d)
          for r, d in ((n.split("/", 1)[1], d) for n, d in saver_records(saver, name(rel))) if r not in have]
    out[rel] = zip_bytes([(n, evil_inputs if n == sample else d) for n, d in pt2] + ts)

    rel = "loadsafety/evil/view_code_upper_py.pt"
    # code/ records ending .PY: torch.jit.load finds them all the same and runs __setstate__.
    out[rel] = zip_bytes([(n[:-3] + ".PY" if "/code/" in n and n.endswith(".py") else n, d)
                          for n, d in saver_records(saver, name(rel))])
    rel = "loadsafety/evil/view_opaque_object_constants.pt"
    out[rel] = zip_bytes([(n, proto() + P.MARK + opaque_object(name(rel)) + P.TUPLE + P.STOP
                           if n.endswith("/constants.pkl") else d) for n, d in zip_records(SCRIPTED)])

    rel = "loadsafety/evil/view_opaque_object_data.ptl"
    mobile = []
    for n, d in zip_records(MOBILE):
        if n.endswith("/data.pkl"):
            at = d.rindex(P.SETITEMS + P.BUILD)  # the module's state dict, then BUILD (and a BINPUT)
            assert len(d) - at <= 5, d[-8:]
            d = d[:at] + ustr("extra") + opaque_object(name(rel)) + d[at:]
        mobile.append((n, d))
    out[rel] = zip_bytes(mobile)

    rel = "loadsafety/evil/view_opaque_object_custom_obj.pt2"
    # What torch._C._pickle_save writes, with the object as its data.pkl.
    custom = zip_bytes([("archive/data.pkl", proto() + opaque_object(name(rel)) + P.STOP),
                        ("archive/version", "3\n"), ("archive/byteorder", "little")])
    records = []
    for n, d in pt2:
        if n.endswith("/model_constants_config.json"):
            config = json.loads(d)
            config["config"]["obj"] = {"path_name": "custom_obj_0", "is_param": False, "use_pickle": True,
                                       "tensor_meta": None}
            d = json.dumps(config).encode()
        records.append((n, d))
    out[rel] = zip_bytes(records + [(top + "/data/constants/custom_obj_0", custom)])

    rel = "loadsafety/evil/view_constants_upper_case.pt"
    # exec planted as an OrderedDict's __setstate__ (BUILD with a dict), then called by a second BUILD.
    chain = glob("torch", "classes.quantized.__getattr__.__builtins__.get") + ustr("exec") + P.TUPLE1 + P.REDUCE
    payload = "import os; os.system('touch %s')" % (MARKER + name(rel))
    data = (proto(4) + glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE +
            P.EMPTY_DICT + ustr("__setstate__") + chain + P.SETITEM + P.BUILD + ustr(payload) + P.BUILD + P.STOP)
    out[rel] = zip_bytes([("archive/data.pkl", data), ("archive/CONSTANTS.pkl", proto() + P.EMPTY_TUPLE + P.STOP),
                          ("archive/byteorder", "little"), ("archive/version", "3\n")])

    rel = "loadsafety/evil/view_pt2_graph_from_file.pt2"
    # A node before the first: ff = from_file(marker, shared=True, size=2), the linear layer's input then.
    records = []
    for n, d in pt2:
        if n.endswith("/models/model.json"):
            doc = json.loads(d)
            graph = doc["graph_module"]["graph"]
            first = graph["nodes"][0]
            assert first["inputs"][0]["arg"] == {"as_tensor": {"name": "x"}}, first["inputs"][0]
            graph["nodes"].insert(0, {
                "target": "torch.ops.aten.from_file.default", "name": "ff", "metadata": {},
                "is_hop_single_tensor_return": None,
                "inputs": [{"name": "filename", "arg": {"as_string": MARKER + name(rel)}, "kind": 1},
                           {"name": "shared", "arg": {"as_bool": True}, "kind": 1},
                           {"name": "size", "arg": {"as_int": 2}, "kind": 1}],
                "outputs": [{"as_tensor": {"name": "ff"}}]})
            first["inputs"][0]["arg"] = {"as_tensor": {"name": "ff"}}
            graph["tensor_values"]["ff"] = graph["tensor_values"]["x"]
            d = json.dumps(doc).encode()
        records.append((n, d))
    out[rel] = zip_bytes(records)

    rel = "loadsafety/crafted/view_pt2_graph_targets.pt2"
    command = "touch " + MARKER + name(rel)
    branch = {"inputs": [], "outputs": [], "tensor_values": {}, "sym_int_values": {}, "sym_bool_values": {},
              "custom_obj_values": {}, "is_single_tensor_return": False,
              "nodes": [{"target": "torch.os.system", "name": "system", "metadata": {},
                         "inputs": [{"name": "command", "arg": {"as_string": command}, "kind": 1}],
                         "outputs": [{"as_none": True}], "is_hop_single_tensor_return": None}]}
    records = []
    for n, d in pt2:
        if n.endswith("/models/model.json"):
            doc = json.loads(d)
            doc["graph_module"]["graph"]["nodes"].append({
                "target": "torch.ops.higher_order.cond", "name": "cond", "metadata": {},
                "is_hop_single_tensor_return": None,
                "inputs": [{"name": "pred", "arg": {"as_bool": True}, "kind": 1},
                           {"name": "true_fn", "arg": {"as_graph": {"name": "true_graph_0", "graph": branch}},
                            "kind": 1},
                           {"name": "false_fn", "arg": {"as_operator": "torch.ops.tsarchive_custom_ns.op.default"},
                            "kind": 1}],
                "outputs": [{"as_none": True}]})
            d = json.dumps(doc).encode()
        records.append((n, d))
    out[rel] = zip_bytes(records)

    rel = "loadsafety/evil/view_aoti_cpp_compile.pt2"
    aoti = "view_aoti_cpp_compile/data/aotinductor/model/model.wrapper"
    flags = {"compiler": "touch %s; true" % (MARKER + name(rel)), "compile_only": True, "cflags": [],
             "definitions": [], "include_dirs": [], "ldflags": [], "libraries_dirs": [], "libraries": [],
             "passthrough_args": []}
    out[rel] = zip_bytes([
        ("view_aoti_cpp_compile/archive_format", "pt2"), ("view_aoti_cpp_compile/archive_version", "0"),
        ("view_aoti_cpp_compile/.data/version", "1"), ("view_aoti_cpp_compile/byteorder", "little"),
        (aoti + ".cpp", "// compiled by the loader\n"),
        (aoti + "_compile_flags.json", json.dumps(flags)),
        (aoti + "_linker_flags.json", json.dumps(dict(flags, compile_only=False))),
        (aoti + "_metadata.json", json.dumps({"AOTI_DEVICE_KEY": "cpu"}))])

    rel = "loadsafety/evil/view_string_escape_global.pkl"
    command = "touch " + MARKER + name(rel)
    out[rel] = (proto() + b"S'p\\x6fsix'\n" + b"S'system'\n" + P.STACK_GLOBAL + ustr(command) + P.TUPLE1 +
                P.REDUCE + P.POP + P.EMPTY_DICT + P.STOP)

    rel = "loadsafety/evil/view_wildcard_dotted.pkl"
    command = "touch " + MARKER + name(rel)
    out[rel] = (proto(4) + glob("mymodel", "os.system") + ustr(command) + P.TUPLE1 + P.REDUCE + P.POP +
                P.EMPTY_DICT + P.STOP)

    rel = "loadsafety/crafted/view_unicode_latin1_key.pt"
    key = "\u00e9".encode()                          # b"\xc3\xa9": UNICODE makes the str "\u00c3\u00a9" of it
    loader_key = key.decode("latin-1")
    data = (proto() + glob("torch._utils", "_rebuild_tensor_v2") + P.MARK +
            P.MARK + ustr("storage") + glob("torch", "FloatStorage") + P.UNICODE + key + b"\n" + ustr("cpu") +
            P.BININT1 + b"\x02" + P.TUPLE + P.BINPERSID +
            P.BININT1 + b"\x00" + P.BININT1 + b"\x02" + P.TUPLE1 + P.BININT1 + b"\x01" + P.TUPLE1 + P.NEWFALSE +
            glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE + P.TUPLE + P.REDUCE + P.STOP)
    out[rel] = zip_bytes([("archive/data.pkl", data), ("archive/byteorder", "little"),
                          ("archive/data/" + key.decode(), struct.pack("<2f", 1.0, 2.0)),
                          ("archive/data/" + loader_key, struct.pack("<2f", 666.0, 777.0)),
                          ("archive/version", "3\n")])

    rel = "hostile/view_zip_flatbuffer_polyglot.pt"
    head = b"PK\x03\x04PTMF"
    out[rel] = head + relocate(zip_bytes(zip_records(SCRIPTED)), len(head))
    assert sorted(out) == sorted(FILES)
    return out


def write_all():
    out = files(*artifacts())
    for rel, data in out.items():
        path = os.path.join(ROOT, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        print("%-55s %6d bytes  sha256 %s" % (rel, len(data), hashlib.sha256(data).hexdigest()[:16]))


# ---- --prove ------------------------------------------------------------------

LOADERS = {
    "torch.load(wo=False)": "import torch,sys; torch.load(sys.argv[1], weights_only=False)",
    "torch.load(wo=True)": "import torch,sys; torch.load(sys.argv[1], weights_only=True)",
    "torch.load(BytesIO)": "import torch,sys,io; torch.load(io.BytesIO(open(sys.argv[1],'rb').read()), weights_only=False)",
    "torch.jit.load": "import torch,sys; torch.jit.load(sys.argv[1])",
    "pickle.load": "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))",
    "torch.export.load": "import torch,sys; torch.export.load(sys.argv[1])",
    "_load_for_lite_interpreter": "import torch,sys; from torch.jit.mobile import _load_for_lite_interpreter as L; L(sys.argv[1])",
    "torch.export.load, run": "import torch,sys; ep = torch.export.load(sys.argv[1]); a, k = ep.example_inputs; "
                              "ep.module()(*a, **k)",
    "aoti_load_package": "import torch,sys; torch._inductor.aoti_load_package(sys.argv[1])",
}
TORCH2_ONLY = {"torch.export.load", "torch.export.load, run", "aoti_load_package"}


def probe(args):
    rel, (tag, python), how = args
    path = os.path.join(ROOT, rel)
    with tempfile.TemporaryDirectory(prefix="tsarchive_prove_") as cwd:
        try:
            r = subprocess.run([python, "-c", LOADERS[how], path], cwd=cwd, capture_output=True, text=True,
                               timeout=300)
            res = "ok" if r.returncode == 0 else "ERR " + ((r.stderr.strip().splitlines() or ["rc %d" % r.returncode])[-1])[:70]
        except subprocess.TimeoutExpired:
            res = "ERR timeout"
        marker = [n for n in os.listdir(cwd) if n.startswith(MARKER)]
    assert marker in ([], [MARKER + os.path.basename(rel)]), marker
    return rel, tag, how, res, marker


def prove():
    jobs = [(rel, py, how) for rel in FILES for py in PYTHONS for how in LOADERS
            if not (how in TORCH2_ONLY and py[0] == "torch1.13")]
    with ThreadPoolExecutor(max_workers=4) as ex:
        results = list(ex.map(probe, jobs))
    hit = {rel: False for rel in FILES}
    print("%-40s %-9s %-26s %-6s %s" % ("file", "python", "loader", "marker", "result"))
    for rel, tag, how, res, marker in results:
        hit[rel] |= bool(marker)
        print("%-40s %-9s %-26s %-6s %s" % (os.path.basename(rel), tag, how, "YES" if marker else "-", res))
    print()
    bad = 0
    for rel, expect in FILES.items():
        rc = subprocess.run([TSARCHIVE, "verify", os.path.join(ROOT, rel)], capture_output=True).returncode
        ok = (hit[rel] != (rel in NO_MARKER)) and rc == expect
        bad += not ok
        print("%-40s tsarchive verify exit %d (expected %d)  marker under some loader: %s  %s" %
              (os.path.basename(rel), rc, expect, ("yes" if hit[rel] else "NO") + (" (none expected)" if rel in NO_MARKER else ""),
               "ok" if ok else "MISMATCH"))
    return bad


def main():
    write_all()
    if "--prove" in sys.argv:
        sys.exit(1 if prove() else 0)


if __name__ == "__main__":
    main()
