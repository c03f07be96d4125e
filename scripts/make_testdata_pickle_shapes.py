#!/usr/bin/env python3
"""Makes testdata/pickle_shapes/: small files written by real PyTorch whose
pickles take shapes that tsarchive once misread (reviews 53 and 53b, on
files of other projects).

    /tmp/venv213/bin/python scripts/make_testdata_pickle_shapes.py   # PyTorch 2.x: every file
    /usr/bin/python3 scripts/make_testdata_pickle_shapes.py          # 1.13: the *_1_13 files
    PYTHON scripts/make_testdata_pickle_shapes.py --prove            # load each with that torch

Files are named by what they hold; *_2_13 / *_1_13 by the PyTorch that wrote them.

    ordereddict_pairs.pth   a legacy (pre-1.6) torch.save whose state dict is
                            collections.OrderedDict([[key, tensor], ...]) by REDUCE,
                            as Python 2 pickled an OrderedDict (lpips 0.1.4's weights)
    dict_pairs.pt           a dict pickled as dict([(key, tensor), ...]) by REDUCE
    config_cycle.pt         {"config": ..., "model": {"w", "b"}}: the config's nodes
                            refer to their parent through the memo, as OmegaConf's
                            do in Lightning checkpoints; the config comes first
    defaultdict_list.pt     {"d": defaultdict(list, a=[1])}: weights_only stops at
                            collections.defaultdict, before __builtin__.list
    record_function_*.pt    torch.jit.script of a module that uses record_function
                            (libtorch's own class torch.classes.profiler._RecordFunction)
    distributed_ops_2_13.pt a scripted method that calls operators of _c10d_functional
                            and symm_mem, which 2.x's libtorch registers (1.13's does not)
    numpy_protocol5_*.pt    torch.save of a numpy array at pickle protocol 5, which
                            numpy reduces to numeric._frombuffer

Review 55c (files of PyPI projects):

    legacy_cut_in_data.pth  a legacy torch.save file cut inside its raw storage data
                            (torch.load: "unexpected EOF, expected N more bytes")
    legacy_trailing.pth     a whole legacy torch.save file followed by 90 bytes that
                            torch.load never reads
    legacy_cut_in_pickle.pth  the same file cut inside its object pickle
    pickle_cut.pkl          a plain pickle cut in the middle of an opcode's operand
    fx_graph_module_2_13.pt torch.save of a torch.fx GraphModule (reduce_graph_module's
                            body dict holds the parameters; loading exec()s its code)
    tensor_attrs_2_13.pt    a tensor and a Parameter with Python attributes
                            (torch._tensor._rebuild_from_type_v2) and a tensor subclass
    sparse_meta_2_13.pt     sparse COO and CSR tensors (_rebuild_sparse_tensor), a meta
                            tensor (_rebuild_meta_tensor_no_storage) and a dense one
    dtypes_2_13.pt          one tensor of every dtype torch.save of 2.13 writes
    jit_new_dtypes_2_13.pt  torch.jit.save of a module with uint16 and float8_e5m2fnuz
                            buffers (storages torch.UInt16Storage, torch.Float8_e5m2fnuzStorage,
                            which libtorch 1.13 does not know)
    pathlib_2_13.pt         a checkpoint holding pathlib.PosixPath('/tmp/x') (Lightning's
                            hparams often do)
"""
import collections
import copyreg
import io
import os
import pickle
import sys
import types

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "pickle_shapes")

# The config's classes, importable as `configlike` (an OmegaConf stand-in:
# NEWOBJ + BUILD of a state whose _parent is the node that holds it).
configlike = types.ModuleType("configlike")
sys.modules["configlike"] = configlike


class DictNode:
    def __init__(self, parent, content=None):
        self._parent = parent
        self._content = content if content is not None else {}


class ListNode(DictNode):
    pass


for _cls in (DictNode, ListNode):
    _cls.__module__ = "configlike"
    setattr(configlike, _cls.__name__, _cls)


class DictByPairs:
    """Pickles as dict([(key, value), ...]): what a __reduce__ returning (dict, (items,)) writes."""

    def __init__(self, items):
        self.items = items

    def __reduce__(self):
        return dict, (list(self.items),)


class _PairsPickler(pickle.Pickler):
    """Pickles an OrderedDict as Python 2 did: OrderedDict([[key, value], ...])."""
    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[collections.OrderedDict] = lambda d: (collections.OrderedDict, ([[k, v] for k, v in d.items()],))


PAIRS_PICKLE = types.SimpleNamespace(Pickler=_PairsPickler, dump=pickle.dump, __name__="pairs_pickle")


# A tensor subclass, importable as `tensorlike.Tagged`.
tensorlike = types.ModuleType("tensorlike")
sys.modules["tensorlike"] = tensorlike


def tensor_subclass(torch):
    class Tagged(torch.Tensor):
        pass
    Tagged.__module__ = "tensorlike"
    Tagged.__qualname__ = "Tagged"
    tensorlike.Tagged = Tagged
    return Tagged


# Every dtype torch.save of PyTorch 2.13 writes (the quantized ones are made
# by quantize_per_tensor; int1-7 and uint1-7 cannot be saved).
SAVED_DTYPES = ["float32", "float64", "float16", "bfloat16", "complex32", "complex64", "complex128", "bool",
                "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float8_e4m3fn",
                "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
                "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16"]


def make_review_55c(torch, out):
    import pathlib
    torch.manual_seed(0)
    sd = collections.OrderedDict([("a.weight", torch.randn(64, 16)), ("a.bias", torch.randn(64)),
                                  ("b.weight", torch.randn(8, 64)), ("steps", torch.tensor(7))])
    buf = io.BytesIO()
    torch.save(sd, buf, _use_new_zipfile_serialization=False)
    whole = buf.getvalue()
    with open(out("legacy_cut_in_data.pth"), "wb") as f:
        f.write(whole[:len(whole) - 1000])
    with open(out("legacy_trailing.pth"), "wb") as f:
        f.write(whole + b"\x00trailing" * 10)
    with open(out("legacy_cut_in_pickle.pth"), "wb") as f:
        f.write(whole[:600])
    data = pickle.dumps({"names": ["x" * 40] * 4, "values": list(range(50))}, protocol=2)
    with open(out("pickle_cut.pkl"), "wb") as f:
        f.write(data[:30])  # inside the first key's BINUNICODE operand

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Linear(4, 3)
            self.bn = torch.nn.BatchNorm1d(3)

        def forward(self, x):
            return self.bn(self.c(x)).relu()

    torch.save(torch.fx.symbolic_trace(Net()), out("fx_graph_module_2_13.pt"))
    t = torch.ones(2)
    t.note = "calibrated"
    p = torch.nn.Parameter(torch.zeros(3))
    p.note = "frozen"
    torch.save({"t": t, "p": p, "plain": torch.full((2, 2), 3.0),
                "sub": torch.arange(4.0).as_subclass(tensor_subclass(torch))}, out("tensor_attrs_2_13.pt"))
    dense = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    torch.save({"coo": dense.to_sparse(), "csr": dense.to_sparse_csr(), "meta": torch.empty(5, device="meta"),
                "dense": torch.ones(2)}, out("sparse_meta_2_13.pt"))
    zoo = {name: torch.zeros(3, dtype=getattr(torch, name)) if not name.startswith("bits")
           else torch.zeros(3, dtype=torch.uint8 if name != "bits16" else torch.int16).view(getattr(torch, name))
           for name in SAVED_DTYPES}
    zoo["qint8"] = torch.quantize_per_tensor(torch.ones(3), 0.5, 0, torch.qint8)
    zoo["quint8"] = torch.quantize_per_tensor(torch.ones(3), 0.5, 1, torch.quint8)
    zoo["qint32"] = torch.quantize_per_tensor(torch.ones(3), 0.5, 0, torch.qint32)
    zoo["quint4x2"] = torch.quantize_per_tensor(torch.ones(4), 0.5, 0, torch.quint4x2)
    zoo["quint2x4"] = torch.quantize_per_tensor(torch.ones(4), 0.5, 0, torch.quint2x4)
    torch.save(zoo, out("dtypes_2_13.pt"))

    class NewDtypes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("u16", torch.tensor([1, 2, 3]).to(torch.uint16))
            self.register_buffer("f8", torch.ones(2).to(torch.float8_e5m2fnuz))

        def forward(self, x):
            return x

    torch.jit.save(torch.jit.script(NewDtypes()), out("jit_new_dtypes_2_13.pt"))
    torch.save({"state_dict": {"w": torch.ones(2)}, "hparams": {"data_dir": pathlib.PosixPath("/tmp/x")}},
               out("pathlib_2_13.pt"))


def tag(torch):
    return "_".join(torch.__version__.split(".")[:2]).split("a")[0].split("+")[0]


def make(torch):
    import numpy as np
    os.makedirs(ROOT, exist_ok=True)
    out = lambda name: os.path.join(ROOT, name)
    v = tag(torch)
    if not v.startswith("1_"):
        sd = collections.OrderedDict([("lin0.model.1.weight", torch.ones(1, 4, 1, 1)),
                                      ("lin1.model.1.weight", torch.full((1, 2, 1, 1), 2.0))])
        torch.save(sd, out("ordereddict_pairs.pth"), pickle_module=PAIRS_PICKLE, _use_new_zipfile_serialization=False)
        torch.save(DictByPairs([("w", torch.ones(2, 3)), ("b", torch.zeros(3))]), out("dict_pairs.pt"))
        root = DictNode(None)
        model = DictNode(root)
        model._content = {"dim": 8, "layers": ListNode(model, [1, 2])}
        root._content = {"model": model, "lr": 0.1}
        torch.save({"config": root, "model": {"w": torch.ones(3, 4), "b": torch.zeros(4)}}, out("config_cycle.pt"))
        torch.save({"d": collections.defaultdict(list, a=[1])}, out("defaultdict_list.pt"), pickle_protocol=2)
        make_review_55c(torch, out)

    class Recorded(torch.nn.Module):
        def forward(self, x):
            with torch.autograd.profiler.record_function("step"):
                return x + 1

    torch.jit.script(Recorded()).save(out("record_function_%s.pt" % v))
    if not v.startswith("1_"):
        class Collective(torch.nn.Module):
            def forward(self, x):
                return x

            @torch.jit.export
            def wait(self, x):
                y = torch.ops.symm_mem.multimem_one_shot_all_reduce(x, "sum", "0")
                return torch.ops._c10d_functional.wait_tensor(y)

        torch.jit.script(Collective()).save(out("distributed_ops_%s.pt" % v))
    torch.save({"a": np.arange(3.0)}, out("numpy_protocol5_%s.pt" % v), pickle_protocol=5)


def prove(torch):
    tensor_subclass(torch)
    for name in sorted(os.listdir(ROOT)):
        path = os.path.join(ROOT, name)
        try:
            if name.startswith(("record_function", "distributed_ops", "jit_")):
                value = torch.jit.load(path)(torch.ones(2))
            else:
                value = torch.load(path, weights_only=False, map_location="cpu")
            print("%s: loads: %s" % (name, summary(value)))
        except Exception as e:  # a file of the other PyTorch may not load here
            print("%s: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0][:160]))
        if not name.startswith(("record_function", "distributed_ops", "jit_")):
            try:
                torch.load(path, weights_only=True)
                print("  weights_only=True: loads")
            except Exception as e:
                text = str(e)
                at = text.find("WeightsUnpickler error:")
                print("  weights_only=True: refuses:", text[at:].splitlines()[0][:160] if at >= 0 else text[:160])


def summary(value, prefix=""):
    import torch
    if isinstance(value, torch.Tensor):
        return "%s%s" % (prefix and prefix + "=", tuple(value.shape))
    if isinstance(value, dict):
        return "{" + ", ".join("%s: %s" % (k, summary(v)) for k, v in value.items()) + "}"
    return type(value).__name__


def main():
    import torch
    if "--prove" in sys.argv:
        prove(torch)
    else:
        make(torch)


if __name__ == "__main__":
    main()
