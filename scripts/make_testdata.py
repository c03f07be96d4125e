#!/usr/bin/python3
"""Generate the tsarchive test data: PyTorch archives plus the facts PyTorch
itself reports about them (testdata/expected/<file>.json).

Generated with Debian 12's python3-torch (torch.__version__ == "1.13.0a0",
i.e. PyTorch 1.13); the exact version is also written into every
expected/*.json as "torch_version".

Regenerate (from the repository root; use Debian's interpreter, which is the
one that has torch installed):

    /usr/bin/python3 scripts/make_testdata.py            # writes testdata/
    /usr/bin/python3 scripts/make_testdata.py OUTDIR     # writes elsewhere

All nn.Module classes live in testdata/models.py, because torch.jit.script
needs their source in a real file (inspect.getsource).

torch.manual_seed(0) is called before each model is built, so tensor values
are reproducible. The TorchScript / torch.save ZIP archives come out
byte-identical between runs (the script re-executes itself with
PYTHONHASHSEED=0, see below); legacy_state_dict.pth does not (the legacy
writer uses storage memory addresses as storage keys). The code/*.debug_pkl
records embed the absolute path of testdata/models.py and of torch's own
sources, so byte identity also needs the same checkout path (/work/main) and
the same torch install. Mangled type names (___torch_mangle_<n>) depend on
the order models are compiled in this script.

Every fact in expected/*.json is read back from the written file
(torch.jit.load, torch.load, zipfile, pickle), not taken from the in-memory
module, except for model.onnx, which this environment cannot read back.
"""

import io
import json
import os
import pickle
import random
import struct
import subprocess
import sys
import zipfile

# TorchScript serializes a module's Final constants (nn.Linear's
# in_features, BatchNorm's momentum, ...) in the iteration order of the
# Python set __constants__, which depends on string hash randomization.
# Re-exec with a fixed PYTHONHASHSEED so the archives are byte-identical
# between runs.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ inside testdata/
# `make_testdata.py --mlp-v2 OUT` is how make_all writes mlp_scripted_v2.pt:
# in a fresh interpreter whose `models` is testdata/models_v2/models.py, so
# TorchScript names its class __torch__.models.MLP like the first release
# (in this process that name is taken, and a second MLP would be mangled).
# `make_testdata.py --quant-per-channel OUT` writes only quant_per_channel.pt
# (make_all writes it too), so it can be added without regenerating the rest.
QUANT_PER_CHANNEL_ONLY = len(sys.argv) == 3 and sys.argv[1] == "--quant-per-channel"
MLP_V2_CHILD = len(sys.argv) == 3 and sys.argv[1] == "--mlp-v2"
if MLP_V2_CHILD:
    sys.path.insert(0, os.path.join(REPO_ROOT, "testdata", "models_v2"))
else:
    sys.path.insert(0, os.path.join(REPO_ROOT, "testdata"))

import torch  # noqa: E402
import torch.jit.mobile  # noqa: E402  (not imported by `import torch`)
from torch import nn  # noqa: E402

import models  # noqa: E402  (testdata/models.py)

TORCH_VERSION = torch.__version__

MLP_EXTRA_FILES = {
    "labels.json": '{"classes": ["cat", "dog", "bird"]}',
    "model_card.md": "# MLP\nA tiny test model.\n",
    "config/train.yaml": "lr: 0.01\nepochs: 3\n",
}
# The second release of the MLP: labels.json changed, metrics.json added.
MLP_V2_EXTRA_FILES = dict(MLP_EXTRA_FILES, **{
    "labels.json": '{"classes": ["cat", "dog", "bird", "fish"]}',
    "metrics.json": '{"accuracy": 0.93}',
})
LITE_EXTRA_FILES = {
    "labels.json": '{"classes": ["cat", "dog", "bird"]}',
}


# --------------------------------------------------------------------------
# Helpers: facts read back from the written files
# --------------------------------------------------------------------------

def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def zip_facts(path):
    """Central-directory order records; data_offset from the LOCAL header."""
    records = []
    version = None
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        infos = zf.infolist()
        tops = {info.filename.split("/", 1)[0] for info in infos}
        assert len(tops) == 1, (path, tops)
        top = tops.pop()
        for info in infos:
            f.seek(info.header_offset)
            hdr = f.read(30)
            (sig, _ver, _flags, _method, _mtime, _mdate, _crc, _csize, _usize,
             name_len, extra_len) = struct.unpack("<IHHHHHIIIHH", hdr)
            assert sig == 0x04034B50, (path, info.filename)
            name = info.filename[len(top) + 1:]
            if info.compress_type == zipfile.ZIP_STORED:
                method = "stored"
            elif info.compress_type == zipfile.ZIP_DEFLATED:
                method = "deflated"
            else:
                method = "method_%d" % info.compress_type
            records.append({
                "name": name,
                "size": info.file_size,
                "compressed_size": info.compress_size,
                "method": method,
                "crc32": info.CRC,
                "data_offset": info.header_offset + 30 + name_len + extra_len,
            })
            if name in ("version", ".data/version"):
                version = int(zf.read(info).decode("ascii").strip())
    return {"top_folder": top, "records": records, "version": version}


def count_records(zfacts, prefix):
    return sum(1 for r in zfacts["records"] if r["name"].startswith(prefix))


class _TensorInfo:
    """Placeholder produced while unpickling constants.pkl without torch."""

    def __init__(self, shape, dtype, stride=None, offset=0, quant=None):
        self.shape = list(shape)
        self.dtype = dtype
        self.stride = list(stride) if stride is not None else None
        self.offset = offset
        self.quant = quant


class _ConstantsUnpickler(pickle.Unpickler):
    """Reads constants.pkl the way a torch-free reader would.

    torch.<X>Storage globals become the dtype that PyTorch associates with
    that storage class (torch.<X>Storage.dtype); the persistent id
    ('storage', <storage class>, key, location, numel) is returned as-is;
    torch._utils._rebuild_tensor_v2 / _rebuild_qtensor return a _TensorInfo
    holding (shape, dtype) instead of building a tensor. Anything else from a
    __torch__ namespace (TorchScript classes) becomes an opaque tuple.
    """

    def find_class(self, module, name):
        if module == "torch" and name.endswith("Storage"):
            return ("storage_class", dtype_name(getattr(torch, name).dtype))
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            def rebuild(storage, offset, size, stride, *rest):
                return _TensorInfo(size, storage[1][1], stride, offset)
            return rebuild
        if module == "torch._utils" and name == "_rebuild_qtensor":
            def rebuild_q(storage, offset, size, stride, qparams, *rest):
                return _TensorInfo(size, storage[1][1], stride, offset, qparams)
            return rebuild_q
        if module == "collections" and name == "OrderedDict":
            return dict
        if module.startswith("__torch__") or module == "torch":
            return lambda *a: ("object", module, name, a)
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return tuple(pid)


def constant_tensors(path, zfacts):
    """Tensor constants of a TorchScript archive, from <top>/constants.pkl.

    Path "CONSTANTS.c<i>" where i is the index in the pickled constants
    tuple (that is how the serialized code refers to them).
    """
    name = zfacts["top_folder"] + "/constants.pkl"
    with zipfile.ZipFile(path) as zf:
        if name not in zf.namelist():
            return []
        consts = _ConstantsUnpickler(io.BytesIO(zf.read(name))).load()
    out = []
    for i, c in enumerate(consts):
        if isinstance(c, _TensorInfo):
            out.append({
                "path": "CONSTANTS.c%d" % i,
                "shape": c.shape,
                "dtype": c.dtype,
                "role": "constant",
                "stride": c.stride,
                "storage_offset": c.offset,
            })
    return out


def tensor_entry(path, t, role):
    e = {
        "path": path,
        "shape": list(t.shape),
        "dtype": dtype_name(t.dtype),
        "role": role,
        "stride": list(t.stride()),
        "storage_offset": t.storage_offset(),
    }
    if t.is_quantized:
        e["qscheme"] = dtype_name(t.qscheme())
        if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            e["q_scale"] = t.q_scale()
            e["q_zero_point"] = t.q_zero_point()
    return e


def module_methods(module):
    return {name: str(module._c._get_method(name).schema)
            for name in module._c._method_names()}


def torchscript_facts(path, kind, extra_names, zfacts):
    extra = {name: "" for name in extra_names}
    m = torch.jit.load(path, _extra_files=extra)
    tensors = []
    for name, p in m.named_parameters():
        tensors.append(tensor_entry(name, p, "parameter"))
    for name, b in m.named_buffers():
        tensors.append(tensor_entry(name, b, "buffer"))

    # Dynamically quantized Linear layers keep their weights inside a
    # torchbind LinearPackedParamsBase object (attribute `_packed_params` of
    # the LinearPackedParams submodule); neither named_parameters() nor
    # state_dict() of the loaded ScriptModule report them. We flatten them
    # as "<LinearPackedParams path>._packed_params.0" (quantized weight) and
    # ".1" (float bias): the indices of the (weight, bias) tuple that
    # data.pkl BUILDs the LinearPackedParamsBase object from. Role "state".
    for mpath, sub in m.named_modules():
        qname = sub._c._type().qualified_name()
        if qname.endswith("quantized.modules.linear.LinearPackedParams"):
            weight, bias = sub._weight_bias()
            prefix = (mpath + "." if mpath else "") + "_packed_params."
            tensors.append(tensor_entry(prefix + "0", weight, "state"))
            if bias is not None:
                tensors.append(tensor_entry(prefix + "1", bias, "state"))

    tensors.extend(constant_tensors(path, zfacts))

    facts = {
        "extra_files": {k: v.decode("utf-8") if isinstance(v, bytes) else v
                        for k, v in extra.items()},
        "parameter_count": sum(p.numel() for _, p in m.named_parameters()),
        "tensors": tensors,
        "methods": module_methods(m),
        "modules": [{"path": mpath, "type": sub._c._type().qualified_name()}
                    for mpath, sub in m.named_modules()],
        # Distinct storage keys: records under data/ plus records under
        # constants/ (tensor constants, e.g. frozen.pt).
        "storages": count_records(zfacts, "data/") + count_records(zfacts, "constants/"),
    }
    if kind == "lite":
        lite = torch.jit.mobile._load_for_lite_interpreter(path)
        facts["lite_methods"] = sorted(
            name for name in m._c._method_names()
            if _lite_has_method(lite, name))
        facts["bytecode_version"] = torch.jit.mobile._get_model_bytecode_version(path)
    return facts


def _lite_has_method(lite, name):
    try:
        lite.find_method(name)
        return True
    except RuntimeError:
        return False


def flatten_state(obj, prefix=""):
    """(path, tensor) pairs of a torch.load result (dict / tensor)."""
    if isinstance(obj, torch.Tensor):
        return [(prefix, obj)]
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(flatten_state(v, (prefix + "." if prefix else "") + str(k)))
    return out


def legacy_storage_keys(path):
    """Storage keys list of a legacy (pre-ZIP) torch.save file.

    Layout: pickle(magic) pickle(protocol) pickle(sys_info) pickle(object,
    with persistent ids) pickle(sorted list of storage keys) raw storages.
    """
    class Anything:
        def __init__(self, *args, **kwargs):
            pass

        def __setitem__(self, key, value):
            pass

        def __setstate__(self, state):
            pass

    class P(pickle.Unpickler):
        def persistent_load(self, pid):
            return None

        def find_class(self, module, name):
            return Anything

    with open(path, "rb") as f:
        for _ in range(4):
            P(f).load()
        return P(f).load()


def torch_save_facts(path, kind, zfacts):
    obj = torch.load(path)
    pairs = flatten_state(obj)
    if zfacts is not None:
        storages = count_records(zfacts, "data/")
    else:
        storages = len(legacy_storage_keys(path))
    return {
        "parameter_count": sum(t.numel() for _, t in pairs),
        "tensors": [tensor_entry(p, t, "state") for p, t in pairs],
        "storages": storages,
    }, obj


def write_expected(outdir, fname, facts):
    facts = dict(facts)
    facts["file"] = fname
    facts["torch_version"] = TORCH_VERSION
    p = os.path.join(outdir, "expected", fname + ".json")
    with open(p, "w") as f:
        json.dump(facts, f, indent=2, sort_keys=True)
        f.write("\n")


def describe(outdir, fname, kind, extra_names=()):
    path = os.path.join(outdir, fname)
    facts = {"kind": kind}
    if kind in ("torchscript", "lite", "torch_save"):
        zfacts = zip_facts(path)
        facts["zip"] = zfacts
    else:
        zfacts = None
    if kind in ("torchscript", "lite"):
        facts.update(torchscript_facts(path, kind, extra_names, zfacts))
    elif kind in ("torch_save", "legacy_torch_save"):
        f2, obj = torch_save_facts(path, kind, zfacts)
        facts.update(f2)
        if isinstance(obj, torch.Tensor):
            facts["values"] = obj.tolist()
    write_expected(outdir, fname, facts)


# --------------------------------------------------------------------------
# Model builders
# --------------------------------------------------------------------------

def warm_up_batchnorm(model, make_input, steps=3):
    """A few train-mode forwards so BatchNorm running stats are not 0/1."""
    model.train()
    with torch.no_grad():
        for _ in range(steps):
            model(make_input())
    model.eval()


def build_mlp():
    torch.manual_seed(0)
    m = models.MLP()
    warm_up_batchnorm(m, lambda: torch.randn(5, 8))
    return torch.jit.script(m)


def write_quant_per_channel(path):
    """Static quantization with per-channel weights (qnnpack engine: Debian's
    torch has no fbgemm): data.pkl rebuilds each weight with
    torch._utils._rebuild_qtensor((torch.per_channel_affine, scales,
    zero_points, axis)), the scales and zero points tensors with storages of
    their own (10 storage records for 6 module tensors)."""
    torch.backends.quantized.engine = "qnnpack"
    torch.manual_seed(0)
    m = models.QuantStatic().eval()
    default = torch.ao.quantization.get_default_qconfig("qnnpack")
    m.qconfig = torch.ao.quantization.QConfig(
        activation=default.activation, weight=torch.ao.quantization.default_per_channel_weight_observer)
    prepared = torch.ao.quantization.prepare(m)
    prepared(torch.randn(2, 3, 8, 8))
    torch.jit.script(torch.ao.quantization.convert(prepared)).save(path)


def write_mlp_v2(path):
    """The second release of the MLP (run in the --mlp-v2 child, see the top).

    Built like build_mlp(), so every tensor starts out equal to the first
    release; then a little "fine-tuning" moves the head: every element of
    head.weight by up to ~0.03, and head.bias[1] by 0.25. The new buffer
    `temperature` (1.5) is added by the v2 source.
    """
    torch.manual_seed(0)
    m = models.MLP()
    warm_up_batchnorm(m, lambda: torch.randn(5, 8))
    with torch.no_grad():
        noise = torch.randn(m.head.weight.shape, generator=torch.Generator().manual_seed(2))
        m.head.weight.add_(noise * 0.01)
        m.head.bias[1] += 0.25
    torch.jit.script(m).save(path, _extra_files=MLP_V2_EXTRA_FILES)


def build_dtypes_v2():
    """models.DTypes with values changed in every dtype, and one layout change.

    Same class and code as dtypes.pt (TorchScript reuses its type), so the
    two archives differ in tensor data only: one element each of w_f64,
    w_bf16, b_i64, b_bool, b_u8 and shared_b (index 9 of the storage it shares
    with shared_a, which stays equal), two of w_f16, the 0-dim `scalar`, and
    `transposed`, saved as a contiguous copy (stride [3, 1] instead of the
    transposed view's [1, 4]) with one element changed.
    """
    torch.manual_seed(0)
    m = models.DTypes().eval()
    with torch.no_grad():
        m.w_f64[1, 2] += 0.125
        m.w_f16.add_(torch.tensor([0.0, 0.001, -0.5, 0.0], dtype=torch.float16))
        m.w_bf16[0, 1] = 3.0
        m.b_i64[4] = -7
        m.b_bool[1] = True
        m.b_u8[0] = 0
        m.scalar.fill_(4.0)
        m.transposed = m.transposed.contiguous()
        m.transposed[3, 0] += 1.0
        m.shared_b[5] = 100.0
    return torch.jit.script(m)


def make_all(outdir):
    os.makedirs(os.path.join(outdir, "expected"), exist_ok=True)
    p = lambda name: os.path.join(outdir, name)  # noqa: E731
    skipped = {}

    # 1. mlp_scripted.pt
    mlp = build_mlp()
    mlp.save(p("mlp_scripted.pt"), _extra_files=MLP_EXTRA_FILES)
    describe(outdir, "mlp_scripted.pt", "torchscript", MLP_EXTRA_FILES)

    # 2. convnet_traced.pt
    torch.manual_seed(0)
    conv = models.ConvNet()
    warm_up_batchnorm(conv, lambda: torch.randn(2, 3, 16, 16))
    traced = torch.jit.trace(conv, torch.randn(1, 3, 16, 16))
    traced.save(p("convnet_traced.pt"))
    describe(outdir, "convnet_traced.pt", "torchscript")

    # 3. dtypes.pt
    torch.manual_seed(0)
    dt = torch.jit.script(models.DTypes().eval())
    dt.save(p("dtypes.pt"))
    describe(outdir, "dtypes.pt", "torchscript")

    # 4. quant_dynamic.pt — Debian's torch has no fbgemm; use qnnpack.
    # torch.jit.script of the quantize_dynamic result works in 1.13 (no
    # tracing fallback needed).
    torch.backends.quantized.engine = "qnnpack"
    torch.manual_seed(0)
    q = torch.quantization.quantize_dynamic(
        models.QuantMLP().eval(), {nn.Linear}, dtype=torch.qint8)
    torch.jit.script(q).save(p("quant_dynamic.pt"))
    describe(outdir, "quant_dynamic.pt", "torchscript")

    # 5. frozen.pt
    torch.manual_seed(0)
    lb = models.LinearBN()
    warm_up_batchnorm(lb, lambda: torch.randn(5, 6))
    frozen = torch.jit.freeze(torch.jit.script(lb.eval()))
    frozen.save(p("frozen.pt"))
    describe(outdir, "frozen.pt", "torchscript")

    # 6. mlp.ptl (lite interpreter; _extra_files is supported)
    mlp = build_mlp()
    mlp._save_for_lite_interpreter(p("mlp.ptl"), _extra_files=LITE_EXTRA_FILES)
    describe(outdir, "mlp.ptl", "lite", LITE_EXTRA_FILES)

    # 7. state_dict.pth (torch.save ZIP)
    torch.manual_seed(0)
    eager = models.MLP()
    warm_up_batchnorm(eager, lambda: torch.randn(5, 8))
    torch.save(eager.state_dict(), p("state_dict.pth"))
    describe(outdir, "state_dict.pth", "torch_save")

    # 8. legacy_state_dict.pth (pre-ZIP pickle format, same state dict)
    torch.save(eager.state_dict(), p("legacy_state_dict.pth"),
               _use_new_zipfile_serialization=False)
    describe(outdir, "legacy_state_dict.pth", "legacy_torch_save")

    # 9. tensor.pt
    torch.manual_seed(0)
    torch.save(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=torch.float32),
               p("tensor.pt"))
    describe(outdir, "tensor.pt", "torch_save")

    # 10. model.onnx
    torch.manual_seed(0)
    tiny = models.TinyLinear().eval()
    try:
        torch.onnx.export(tiny, torch.randn(1, 4), p("model.onnx"),
                          input_names=["input"], output_names=["output"],
                          opset_version=13)
        with open(p("model.onnx"), "rb") as f:
            blob = f.read()
        # The onnx Python package is not installed, so the file cannot be
        # read back; these facts come from the exported in-memory module
        # (initializer names are checked to be present in the protobuf).
        for name, _ in tiny.named_parameters():
            assert name.encode() in blob, name
        write_expected(outdir, "model.onnx", {
            "kind": "onnx",
            "size": len(blob),
            "parameter_count": sum(t.numel() for t in tiny.parameters()),
            "tensors": [tensor_entry(n, t, "parameter")
                        for n, t in tiny.named_parameters()],
            "note": "facts from the exported torch module; no onnx package to read the file back",
        })
    except Exception as e:  # pragma: no cover - depends on the environment
        skipped["model.onnx"] = "%s: %s" % (type(e).__name__, e)
        if os.path.exists(p("model.onnx")):
            os.remove(p("model.onnx"))

    # 11. gru_scripted.pt
    torch.manual_seed(0)
    torch.jit.script(models.GRUNet().eval()).save(p("gru_scripted.pt"))
    describe(outdir, "gru_scripted.pt", "torchscript")

    # 12. second releases, for `tsarchive diff`
    subprocess.run([sys.executable, os.path.abspath(__file__), "--mlp-v2", p("mlp_scripted_v2.pt")],
                   check=True)
    describe(outdir, "mlp_scripted_v2.pt", "torchscript", MLP_V2_EXTRA_FILES)
    build_dtypes_v2().save(p("dtypes_v2.pt"))
    describe(outdir, "dtypes_v2.pt", "torchscript")

    # 13. quant_per_channel.pt, in a fresh interpreter (the mangled names of the
    # others stay as they were). No expected/*.json: tests/unit/test_inspect.cc
    # and tests/pytorch/check_workflows.py check it against PyTorch.
    subprocess.run([sys.executable, os.path.abspath(__file__), "--quant-per-channel", p("quant_per_channel.pt")],
                   check=True)

    write_readme(outdir, skipped)
    return skipped


README_FILES = [
    ("mlp_scripted.pt", "torch.jit.script of models.MLP (eval): nested submodules "
     "(encoder.0 Linear, encoder.1 BatchNorm1d, encoder.2 ReLU, head Linear), buffer "
     "`offset`, exported method `scaled(x, scale: float = 2.0)`, and extra files "
     "labels.json, model_card.md, config/train.yaml (under extra/)."),
    ("convnet_traced.pt", "torch.jit.trace of models.ConvNet (Conv2d, BatchNorm2d, ReLU, "
     "AdaptiveAvgPool2d, Linear) on a 1x3x16x16 input: traced (not scripted) code layout."),
    ("dtypes.pt", "Scripted models.DTypes: float64/float16/bfloat16/float32 parameters; "
     "int64/bool/uint8/int8 buffers, a 0-dim tensor, a transposed (non-contiguous) view "
     "and two slice views sharing one storage (storage offset + sharing)."),
    ("quant_dynamic.pt", "quantize_dynamic(models.QuantMLP, {Linear}, qint8) (qnnpack engine) "
     "then torch.jit.script: quantized weights in a torchbind LinearPackedParamsBase, "
     "QInt8Storage and torch._utils._rebuild_qtensor in data.pkl."),
    ("quant_per_channel.pt", "Static quantization of models.QuantStatic (Conv2d, Linear) with "
     "per-channel weights (qnnpack engine) then torch.jit.script: each _rebuild_qtensor carries "
     "(per_channel_affine, scales, zero_points, axis), the scales and zero points with storages "
     "of their own (10 storage records, 6 module tensors)."),
    ("frozen.pt", "torch.jit.freeze of scripted models.LinearBN (eval): no parameters left; "
     "folded weights are tensor constants in constants.pkl with storages under constants/."),
    ("mlp.ptl", "The MLP saved with _save_for_lite_interpreter (+ extra/labels.json): "
     "lite-interpreter archive with bytecode.pkl."),
    ("state_dict.pth", "torch.save(MLP.state_dict()): torch.save ZIP format, not TorchScript."),
    ("legacy_state_dict.pth", "Same state dict with _use_new_zipfile_serialization=False: "
     "legacy pre-ZIP pickle stream (not byte-identical between runs)."),
    ("tensor.pt", "torch.save of one 2x3 float32 tensor [[1,2,3],[4,5,6]] (an input file)."),
    ("model.onnx", "torch.onnx.export of models.TinyLinear (Linear 4->2), opset 13: "
     "an ONNX protobuf, must be recognised as not-PyTorch."),
    ("gru_scripted.pt", "Scripted models.GRUNet (nn.GRU + Linear): GRU weights also "
     "referenced from the `_flat_weights` list attribute (pickle memo reuse)."),
    ("mlp_scripted_v2.pt", "The next release of mlp_scripted.pt, for `tsarchive diff`: "
     "the MLP of models_v2/models.py (same architecture and class name; scaled() clamps its "
     "result, new exported method predict() and buffer `temperature`), head.weight (all 48 "
     "elements, by up to ~0.03) and head.bias[1] (+0.25) changed, extra labels.json changed "
     "and metrics.json added. Written by `make_testdata.py --mlp-v2` in a fresh interpreter, "
     "so its class is __torch__.models.MLP as in the first release."),
    ("dtypes_v2.pt", "dtypes.pt with changed values in every dtype (float64, float16, "
     "bfloat16, int64, bool, uint8, the 0-dim scalar, one element of a storage shared by two "
     "views) and `transposed` saved contiguous (stride [3, 1] instead of [1, 4]); same code."),
]


def write_readme(outdir, skipped):
    lines = [
        "# tsarchive test data",
        "",
        "Generated by `scripts/make_testdata.py` with PyTorch %s (Debian 12 python3-torch)."
        % TORCH_VERSION,
        "",
        "Regenerate from the repository root:",
        "",
        "    /usr/bin/python3 scripts/make_testdata.py",
        "",
        "(`/usr/bin/python3` is Debian's interpreter, the one with torch.) Module classes "
        "are in `models.py`. `expected/<file>.json` holds the facts PyTorch reports when "
        "reading each archive back (ZIP records with local-header data offsets, extra "
        "files, tensors, method schemas, module types, storage counts).",
        "",
        "## Files",
        "",
    ]
    for name, text in README_FILES:
        if name in skipped:
            lines.append("- `%s`: SKIPPED (%s)" % (name, skipped[name]))
        else:
            lines.append("- `%s`: %s" % (name, text))
    lines += [
        "",
        "## Notes",
        "",
        "- `parameter_count` is the sum over `named_parameters()` of the loaded module "
        "(0 for frozen.pt and quant_dynamic.pt), or over all tensors for torch.save files.",
        "- quant_dynamic.pt: the packed weights are reported as tensors "
        "`fcN._packed_params._packed_params.0` (qint8 weight) and `.1` (float bias), "
        "role `state`: the (weight, bias) tuple data.pkl BUILDs the "
        "LinearPackedParamsBase object from.",
        "- Tensor constants (role `constant`, path `CONSTANTS.c<i>`) are read by "
        "unpickling constants.pkl without building tensors.",
        "- `storages` counts records under `data/` plus `constants/` (ZIP) or the "
        "storage-key list (legacy format).",
        "- Archives are byte-identical between runs (PYTHONHASHSEED is pinned) except "
        "legacy_state_dict.pth (storage keys are memory addresses); code/*.debug_pkl "
        "embeds the absolute source paths, so regenerating from another checkout path "
        "changes those records. `___torch_mangle_<n>` numbers depend on generation order.",
        "- `stride`, `storage_offset` (and `qscheme`, `q_scale`, `q_zero_point` for "
        "quantized tensors) are extra per-tensor facts.",
        "",
    ]
    with open(os.path.join(outdir, "README.md"), "w") as f:
        f.write("\n".join(lines))


def main():
    if MLP_V2_CHILD:
        write_mlp_v2(sys.argv[2])
        return
    if QUANT_PER_CHANNEL_ONLY:
        write_quant_per_channel(sys.argv[2])
        return
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO_ROOT, "testdata")
    skipped = make_all(os.path.abspath(outdir))
    # testdata/hostile/ and its README lines are made from these archives.
    subprocess.check_call([sys.executable, os.path.join(REPO_ROOT, "scripts", "make_hostile.py"), outdir])
    for name, why in skipped.items():
        print("skipped %s: %s" % (name, why), file=sys.stderr)
    print("wrote test data to %s (torch %s)" % (outdir, TORCH_VERSION))


if __name__ == "__main__":
    main()
