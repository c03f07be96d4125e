#!/usr/bin/python3
"""Generate the test data for `tsarchive trace`, `convert` and `inspect
--graph/--ops` (testdata/jit/): small scripted models written by Python's
torch, the outputs Python computes for the inputs the tests give, and
expected.json with Python's torch.jit.export_opnames for every archive.

Regenerate from the repository root with Debian's interpreter (the one that
has torch):

    /usr/bin/python3 scripts/make_jit_testdata.py            # writes testdata/jit/
    /usr/bin/python3 scripts/make_jit_testdata.py OUTDIR     # writes elsewhere

The model classes live in testdata/jit/jit_models.py (scripting needs their
source in a real file). Every fact in expected.json is computed from the
written archives read back with torch.jit.load, not from the in-memory
modules. Inputs are what `tsarchive ... --input SHAPE --seed 0` generates:
torch.manual_seed(0) then torch.randn(SHAPE).
"""

import json
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ inside testdata/
sys.path.insert(0, os.path.join(REPO_ROOT, "testdata", "jit"))

import torch  # noqa: E402

import jit_models  # noqa: E402  (testdata/jit/jit_models.py)


def trained_batchnorm(model, shape):
    """Running statistics that are not the defaults, so eval mode matters."""
    model.train()
    torch.manual_seed(1)
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(shape) * 3 + 1)


def build(name):
    """(module to script, input shape, training mode when saved, notes)."""
    torch.manual_seed(42)
    if name == "mlp_bn":
        m = jit_models.MLPWithBatchNorm()
        trained_batchnorm(m, (16, 8))
        return m, "4x8", True, "scripted MLP with BatchNorm1d, saved in training mode"
    if name == "value_loop":
        return jit_models.ValueLoop().eval(), "2x3", False, "loop count depends on input values: its trace does not generalise"
    if name == "gru":
        return jit_models.GRUEncoder().eval(), "1x5x4", False, "GRU over a sequence, returns (output, hidden)"
    if name == "convnet":
        m = jit_models.SmallConvNet()
        trained_batchnorm(m, (4, 3, 32, 32))
        return m.eval(), "1x3x32x32", False, "conv-bn-relu stages, global pooling, linear classifier"
    if name == "labelled":
        return jit_models.Labelled().eval(), "2x3", False, "returns (Tensor, str): tracing it fails"
    if name == "forked":
        return jit_models.Forked().eval(), "2x3", False, "torch.jit.fork: export_opnames throws"
    if name == "quant_mlp":
        m = torch.quantization.quantize_dynamic(jit_models.QuantMLP().eval(), {torch.nn.Linear}, dtype=torch.qint8)
        return m, "4x8", False, "dynamically quantized linear layers (qint8)"
    raise KeyError(name)


MODELS = ["mlp_bn", "value_loop", "gru", "convnet", "labelled", "quant_mlp", "forked"]


def seeded(spec):
    torch.manual_seed(0)
    return torch.randn([int(d) for d in spec.split("x")])


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO_ROOT, "testdata", "jit")
    os.makedirs(out_dir, exist_ok=True)
    expected = {"torch_version": torch.__version__, "models": {}}
    for name in MODELS:
        module, spec, training, about = build(name)
        scripted = torch.jit.script(module)
        if training:
            scripted.train()
        path = os.path.join(out_dir, name + ".pt")
        torch.jit.save(scripted, path)

        loaded = torch.jit.load(path)
        fact = {
            "file": name + ".pt",
            "about": about,
            "input": spec,
            "saved_training": bool(loaded.training),
        }
        try:
            fact["export_opnames"] = sorted(torch.jit.export_opnames(loaded))
        except RuntimeError as e:  # what `inspect --ops` must fall back from
            fact["export_opnames"] = None
            fact["export_opnames_error"] = str(e).splitlines()[0]
        loaded.eval()  # tsarchive runs every module in eval mode
        with torch.no_grad():
            out = loaded(seeded(spec))
        torch.save(out, os.path.join(out_dir, name + "_out.pt"))
        fact["output"] = name + "_out.pt"
        expected["models"][name] = fact
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
