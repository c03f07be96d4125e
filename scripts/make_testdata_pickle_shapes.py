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
    for name in sorted(os.listdir(ROOT)):
        path = os.path.join(ROOT, name)
        try:
            if name.startswith(("record_function", "distributed_ops")):
                value = torch.jit.load(path)(torch.ones(2))
            else:
                value = torch.load(path, weights_only=False, map_location="cpu")
            print("%s: loads: %s" % (name, summary(value)))
        except Exception as e:  # a file of the other PyTorch may not load here
            print("%s: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0][:160]))
        if not name.startswith(("record_function", "distributed_ops")):
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
