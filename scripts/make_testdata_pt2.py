#!/usr/bin/env python3
"""Writes testdata/pt2/: PT2 archives (torch.export and AOTInductor) from
PyTorch 2.x (torch==2.13.0, CPU wheel), and the facts Python reads back from
them, for `tsarchive inspect` on .pt2 files.

Run from the repository root with the venv scripts/dev.sh torch2 makes
(AOTInductor compiles C++: it needs g++):

    .venv/bin/python scripts/make_testdata_pt2.py

Writes:
  mlp_dynamic.pt2       torch.export.save of an MLP with a dynamic batch
                        dimension (torch.export.Dim "batch", 1..64)
  with_extra.pt2        a fixed-shape model saved with extra files
  buffers_consts.pt2    a model with a persistent buffer, a non-persistent
                        buffer and a lifted tensor constant, two inputs and a
                        tuple output
  sym_exprs.pt2         a model whose graph holds the symbolic expressions
                        torch.export writes (sympy's srepr, as expr_str):
                        derived dimensions, //, %, Max/Min, an unbacked
                        .item(), symbolic floats and booleans (cond); every
                        one must pass tsarchive's grammar of what
                        torch.export.load hands to sympy.sympify
                        (`--sym-exprs-only` writes just this file)
  mlp_dynamic_aoti.pt2  torch._inductor.aoti_compile_and_package of the
                        MLP's ExportedProgram, on the CPU (portable code,
                        no line tables)
  buffers_consts_aoti.pt2  the same of buffers_consts
  expected.json         what torch.export.load (and the ZIP directory) says
                        about each file: signatures, input/output specs,
                        parameters/buffers/constants with shapes and dtypes,
                        range constraints, records

Models are tiny so the files stay small. Values are seeded; the program JSON
holds source file paths and line numbers of this script, so the bytes change
if the script moves, not the facts.
"""

import json
import os
import shutil
import sys
import tempfile
import zipfile

import torch
from torch import Tensor, nn

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO_ROOT, "testdata", "pt2")

# Inductor options for packages that must run on any x86-64 CPU (CI's among
# them): code for the baseline ISA instead of -march=native (GCC then used
# AVX-512 of the machine that wrote them, although the package's metadata said
# AOTI_CPU_ISA INVALID_VEC_ISA: they died with SIGILL on an AVX2 machine), and
# no line tables (they were 80% of the .so).
PORTABLE = {"cpp.march": "x86-64", "aot_inductor.enable_line_tables": False}
EXTRA = {"labels.json": '{"classes": ["cat", "dog", "bird"]}', "notes/card.md": "# Tiny\nA fixed-shape model.\n"}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 2, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x).sigmoid()


class BuffersConsts(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.full((5,), 0.5))
        self.register_buffer("offset", torch.arange(5, dtype=torch.float32))
        self.register_buffer("steps", torch.tensor(3, dtype=torch.int64))
        self.register_buffer("cache", torch.ones(2, 5, dtype=torch.float16), persistent=False)
        self.table = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64)  # a plain attribute: a lifted constant

    def forward(self, x: Tensor, mask: Tensor):
        y = x * self.scale + self.offset + self.table.to(x.dtype) + self.cache.to(x.dtype).sum(0)
        return y.masked_fill(mask, 0.0), y.sum() * self.steps


class SymExprs(nn.Module):
    def forward(self, x: Tensor, k: Tensor):
        n, m = x.shape
        u = k.item()
        torch._check(u >= 0)
        torch._check(u <= n)
        r = torch.cond(n > 4, lambda t: t + 1, lambda t: t - 1, (x[: n // 2 + 1] * (n % 3),))
        return r, x * (n / 3.0), torch.ones(max(n, m) * 2 - 1), x[:u]


def save_sym_exprs():
    # Not through save_exported: its facts stop at a symbolic float's unbounded range.
    dims = {"x": {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO}, "k": None}
    ep = torch.export.export(SymExprs(), (torch.randn(6, 4), torch.tensor(3)), dynamic_shapes=dims)
    path = os.path.join(OUT, "sym_exprs.pt2")
    torch.export.save(ep, path)
    torch.export.load(path)


def dtype_id(dtype):
    return str(dtype).replace("torch.", "")


def tensor_fact(t):
    return {"shape": [str(d) for d in t.shape], "dtype": dtype_id(t.dtype), "bytes": t.numel() * t.element_size()
            if all(isinstance(d, int) for d in t.shape) else None}


def arg_fact(arg):
    # InputSpec/OutputSpec .arg: TensorArgument, SymIntArgument, ConstantArgument, ...
    name = getattr(arg, "name", None)
    fact = {"type": type(arg).__name__, "name": name}
    if type(arg).__name__ == "ConstantArgument":
        fact["value"] = repr(arg.value)
    return fact


def program_facts(ep):
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    outputs = [n for n in ep.graph.nodes if n.op == "output"][0].args[0]
    sig = ep.graph_signature

    def val_of(node):
        val = node.meta.get("val") if node is not None else None
        return tensor_fact(val) if isinstance(val, torch.Tensor) else None

    inputs = []
    for spec in sig.input_specs:
        fact = {"kind": spec.kind.name, "arg": arg_fact(spec.arg), "target": spec.target,
                "persistent": spec.persistent}
        fact["value"] = val_of(placeholders.get(getattr(spec.arg, "name", None)))
        inputs.append(fact)
    out_nodes = {getattr(n, "name", None): n for n in outputs if isinstance(n, torch.fx.Node)}
    outs = []
    for spec in sig.output_specs:
        fact = {"kind": spec.kind.name, "arg": arg_fact(spec.arg), "target": spec.target}
        fact["value"] = val_of(out_nodes.get(getattr(spec.arg, "name", None)))
        outs.append(fact)
    return {
        "user_inputs": list(sig.user_inputs),
        "user_outputs": list(sig.user_outputs),
        "input_specs": inputs,
        "output_specs": outs,
        "parameters": {k: tensor_fact(v) for k, v in ep.state_dict.items() if k in sig.parameters},
        "buffers": {k: tensor_fact(v) for k, v in ep.state_dict.items() if k in sig.buffers},
        "non_persistent_buffers": sorted(sig.non_persistent_buffers),
        "constants": {k: tensor_fact(v) for k, v in ep.constants.items() if isinstance(v, torch.Tensor)},
        "range_constraints": {str(k): [_bound(v.lower), _bound(v.upper)] for k, v in ep.range_constraints.items()},
        "graph_nodes": sum(1 for _ in ep.graph.nodes),
        "call_functions": sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"}),
        # What `inspect --ops` lists: each operator's own name ("aten::sum" for aten.sum.default).
        "operator_names": sorted({n.target.name() for n in ep.graph.nodes
                                  if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)}),
    }


def _bound(b):
    try:
        return int(b)
    except (TypeError, ValueError, OverflowError):
        return str(b)  # oo, -oo


def zip_facts(path):
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        return {
            "file_size": os.path.getsize(path),
            "top_folder": infos[0].filename.split("/", 1)[0],
            "records": [{"name": i.filename.split("/", 1)[1], "size": i.file_size,
                         "stored": i.compress_type == zipfile.ZIP_STORED} for i in infos],
        }


def json_record(path, name):
    with zipfile.ZipFile(path) as z:
        top = z.infolist()[0].filename.split("/", 1)[0]
        return json.loads(z.read(top + "/" + name))


def save_exported(name, model, args, dynamic_shapes=None, extra_files=None):
    torch.manual_seed(0)
    ep = torch.export.export(model.eval(), args, dynamic_shapes=dynamic_shapes)
    path = os.path.join(OUT, name + ".pt2")
    torch.export.save(ep, path, extra_files=extra_files)
    loaded_extra = {k: "" for k in (extra_files or {})}
    back = torch.export.load(path, extra_files=loaded_extra)
    facts = {"kind": "exported_program", "models": {"model": program_facts(back)}, "extra_files": loaded_extra}
    facts["weights_config"] = json_record(path, "data/weights/model_weights_config.json")
    facts["constants_config"] = json_record(path, "data/constants/model_constants_config.json")
    facts.update(zip_facts(path))
    return ep, facts


def save_aoti(name, ep, sample):
    from torch._inductor import aoti_compile_and_package, aoti_load_package

    path = os.path.join(OUT, name + ".pt2")
    tmp = tempfile.mkdtemp(prefix="tsarchive-aoti-")
    try:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tmp
        # Scalar kernels (no vectorized ISA), with PORTABLE's options.
        os.environ["ATEN_CPU_CAPABILITY"] = "default"
        aoti_compile_and_package(ep, package_path=path, inductor_configs=PORTABLE)
        runner = aoti_load_package(path)
        metadata = dict(runner.loader.get_metadata())
        out = runner(*sample)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    outs = out if isinstance(out, (list, tuple)) else [out]
    facts = {"kind": "aoti_package", "metadata": metadata, "output_shapes": [list(o.shape) for o in outs]}
    facts.update(zip_facts(path))
    return facts


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    save_sym_exprs()
    if "--sym-exprs-only" in sys.argv:
        return 0
    expected = {"torch_version": torch.__version__, "files": {}}

    mlp = MLP()
    batch = torch.export.Dim("batch", min=1, max=64)
    ep_mlp, facts = save_exported("mlp_dynamic", mlp, (torch.randn(2, 4),), dynamic_shapes={"x": {0: batch}})
    expected["files"]["mlp_dynamic.pt2"] = facts

    _, facts = save_exported("with_extra", Tiny(), (torch.randn(3, 6),), extra_files=EXTRA)
    expected["files"]["with_extra.pt2"] = facts

    bc = BuffersConsts()
    ep_bc, facts = save_exported("buffers_consts", bc, (torch.randn(2, 5), torch.zeros(2, 5, dtype=torch.bool)))
    expected["files"]["buffers_consts.pt2"] = facts

    facts = save_aoti("mlp_dynamic_aoti", ep_mlp, (torch.randn(5, 4),))
    expected["files"]["mlp_dynamic_aoti.pt2"] = facts
    facts = save_aoti("buffers_consts_aoti", ep_bc, (torch.randn(2, 5), torch.zeros(2, 5, dtype=torch.bool)))
    expected["files"]["buffers_consts_aoti.pt2"] = facts

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    for name in sorted(os.listdir(OUT)):
        print(f"{os.path.getsize(os.path.join(OUT, name)):>9}  testdata/pt2/{name}")


if __name__ == "__main__":
    sys.exit(main())
