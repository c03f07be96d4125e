#!/usr/bin/python3
"""Real PyTorch agrees with `tsarchive trace`, `convert` and `inspect --graph/--ops`.

Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):

    /usr/bin/python3 tests/pytorch/check_jit.py TSARCHIVE TESTDATA_DIR

On the models of testdata/jit (scripts/make_jit_testdata.py): every archive
trace and convert write loads in Python's torch.jit (or its lite interpreter)
and computes what Python computed from the original; the loop model's trace is
flagged, and Python confirms it is wrong on another input; libtorch 1.13's
unloadable optimize_for_inference output is refused with nothing written;
the .ptl runs through `tsarchive run`; --ops equals Python's
torch.jit.export_opnames (stored at generation) and the lite interpreter's
operator list; bad input gives one line, the documented exit code and no file;
`dot` accepts the DOT (skipped without graphviz); inspect without --graph/--ops
never loads libtorch.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from harness import check, finish

try:
    import torch
    from torch.jit.mobile import _export_operator_list, _load_for_lite_interpreter
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
JIT = os.path.join(TESTDATA, "jit")
EXPECTED = json.load(open(os.path.join(JIT, "expected.json")))["models"]


def tsarchive(*args, env=None):
    """The raw result: these checks look at exit codes and files themselves."""
    return subprocess.run([TSARCHIVE, *args], capture_output=True, text=True, env=env)


def seeded(spec, seed=0):
    torch.manual_seed(seed)
    return torch.randn([int(d) for d in spec.split("x")])


def close(a, b, atol=1e-5, rtol=1e-3):
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=rtol)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(close(x, y, atol, rtol) for x, y in zip(a, b))
    return a == b


def reference(name):
    return torch.load(os.path.join(JIT, EXPECTED[name]["output"]), weights_only=False)  # 2.6+: plain tensors only


def model(name):
    return os.path.join(JIT, EXPECTED[name]["file"])


def stamp_of(path):
    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if n.endswith("/extra/producer_info.json")]
        return json.loads(z.read(names[0])) if names else None


def one_error_line(r, what):
    lines = r.stderr.strip().splitlines()
    errors = [l for l in lines if l.startswith("tsarchive: error: ")]
    check(len(errors) == 1, f"{what}: one error line, got {lines}")
    check(all(l.startswith("tsarchive: ") for l in lines), f"{what}: only tsarchive lines on stderr: {lines}")


with tempfile.TemporaryDirectory() as tmp:

    def out(name):
        return os.path.join(tmp, name)

    # --- convert: outputs match Python's, archives load in Python, stamped ---
    # optimize_for_mobile needs XNNPACK, which the CPU wheels of libtorch 2.x
    # leave out (Debian's 1.13 has it): there --mobile is one line, exit 5.
    probe = tsarchive("convert", model("convnet"), "--input", "1x3x32x32", "--mobile", "-o", out("probe.pt"))
    has_xnnpack = "without XNNPACK" not in probe.stderr
    if not has_xnnpack:
        check(probe.returncode == 5 and len(probe.stderr.strip().splitlines()) == 1
              and not os.path.exists(out("probe.pt")), f"--mobile without XNNPACK: {probe.returncode} {probe.stderr}")
        print("note: this libtorch has no XNNPACK: --mobile is refused in one line; .ptl checks use --lite")
    mobile = ["--mobile"] if has_xnnpack else ["--lite"]
    for name, flags in [("mlp_bn", ["--freeze"]), ("convnet", ["--freeze"]), ("gru", ["--freeze"]),
                        ("quant_mlp", ["--freeze"]), ("mlp_bn", ["--optimize-for-inference"]),
                        ("convnet", ["--mobile"])]:
        if flags == ["--mobile"] and not has_xnnpack:
            continue
        spec = EXPECTED[name]["input"]
        dest = out(f"{name}_{flags[0][2:]}.pt")
        r = tsarchive("convert", model(name), "--input", spec, *flags, "-o", dest, "--json")
        check(r.returncode == 0, f"convert {name} {flags}: exit {r.returncode}: {r.stderr}")
        if r.returncode != 0:
            continue
        doc = json.loads(r.stdout)
        check(doc["schema"] == "tsarchive.convert/1" and doc["written"] and doc["passed"], f"convert {name}: {doc}")
        check(doc["reloaded_with"] == "torch::jit::load", f"convert {name}: reloaded with {doc['reloaded_with']}")
        loaded = torch.jit.load(dest)
        with torch.no_grad():
            check(close(loaded(seeded(spec)), reference(name)), f"convert {name} {flags}: Python's output differs")
        stamp = stamp_of(dest)
        check(stamp is not None and stamp["producer"]["method"] == "export-hook", f"convert {name}: stamp {stamp}")
        check(stamp and stamp["conversion"].endswith("save TorchScript (.pt)"), f"convert {name}: steps {stamp}")
        check(tsarchive("verify", dest).returncode == 0, f"convert {name}: verify fails on the output")
        if flags == ["--freeze"]:
            graph = loaded.graph.str() if hasattr(loaded.graph, "str") else str(loaded.graph)
            check("prim::GetAttr" not in graph, f"convert {name} --freeze: the graph still reads attributes")

    # Saved in training mode: converted in eval mode, and said so.
    r = tsarchive("convert", model("mlp_bn"), "--input", "4x8", "--freeze", "-o", out("mlp_eval.pt"))
    check("saved in training mode" in r.stderr and "eval mode" in r.stderr, f"training-mode note: {r.stderr}")

    # --- the lite interpreter: .ptl runs through `tsarchive run` and in Python ---
    ptl = out("convnet.ptl")
    r = tsarchive("convert", model("convnet"), "--input", "1x3x32x32", *mobile, "-o", ptl, "--json")
    check(r.returncode == 0 and json.loads(r.stdout)["reloaded_with"] == "torch::jit::_load_for_mobile",
          f"convert {mobile[0]} .ptl: {r.returncode} {r.stderr}")
    if os.path.exists(ptl):
        r = tsarchive("run", ptl, "--input", "1x3x32x32", "--expect", "@" + os.path.join(JIT, "convnet_out.pt"))
        check(r.returncode == 0, f"run .ptl against Python's output: {r.returncode} {r.stderr}")
        lite = _load_for_lite_interpreter(ptl)
        check(close(lite(seeded("1x3x32x32")), reference("convnet")), "Python's lite interpreter disagrees")
        r = tsarchive("inspect", ptl, "--ops", "--json")
        check(r.returncode == 0 and json.loads(r.stdout)["operators"] == sorted(_export_operator_list(lite))
              and json.loads(r.stdout)["source"] == "bytecode", f"--ops on .ptl: {r.stdout} {r.stderr}")
    lite_plain = out("gru.ptl")
    r = tsarchive("convert", model("gru"), "--input", "1x5x4", "-o", lite_plain)
    check(r.returncode == 0, f"convert to .ptl without passes: {r.stderr}")
    if os.path.exists(lite_plain):
        check(close(_load_for_lite_interpreter(lite_plain)(seeded("1x5x4")), reference("gru")), "gru.ptl output")

    # --- optimize_for_inference: libtorch 1.13 cannot load what it saves for convolutions ---
    ofi_dir = out("ofi")
    os.mkdir(ofi_dir)
    r = tsarchive("convert", model("convnet"), "--input", "1x3x32x32", "--optimize-for-inference",
                  "-o", os.path.join(ofi_dir, "deploy.pt"))
    if torch.__version__.startswith("1."):
        check(r.returncode == 5, f"optimize_for_inference reload failure: exit {r.returncode} {r.stderr}")
        check("does not load back" in r.stderr, f"optimize_for_inference: says why: {r.stderr}")
        one_error_line(r, "optimize_for_inference")
        check(os.listdir(ofi_dir) == [], f"optimize_for_inference left {os.listdir(ofi_dir)}")

    # --- trace: matches the original on the example and in Python ---
    for name in ["mlp_bn", "gru", "convnet", "quant_mlp"]:
        spec = EXPECTED[name]["input"]
        dest = out(f"{name}_traced.pt")
        r = tsarchive("trace", model(name), "--input", spec, "-o", dest, "--json")
        check(r.returncode == 0, f"trace {name}: exit {r.returncode}: {r.stderr}")
        if r.returncode != 0:
            continue
        doc = json.loads(r.stdout)
        check(doc["schema"] == "tsarchive.trace/1" and doc["steps"][:2] == ["eval", "trace forward"], f"trace {name}: {doc['steps']}")
        check(doc["fresh_inputs"] == {"compared": 3, "mismatched": 0}, f"trace {name}: fresh {doc['fresh_inputs']}")
        check(not [w for w in doc["warnings"] if w["kind"] == "value-control-flow"], f"trace {name}: {doc['warnings']}")
        traced = torch.jit.load(dest)
        with torch.no_grad():
            check(close(traced(seeded(spec)), reference(name)), f"trace {name}: Python's output differs")
            check(close(traced(seeded(spec, 7)), torch.jit.load(model(name)).eval()(seeded(spec, 7))),
                  f"trace {name}: differs from the original on another input")
        check("prim::Loop" not in str(traced.graph) and "prim::If" not in str(traced.graph),
              f"trace {name}: control flow left in the trace")

    # A method whose float parameter keeps its default: the trace takes the tensor only, named as declared.
    # A trace records that method alone: dropping forward needs --allow-drop (exit 1, nothing written without).
    dest = out("scaled_traced.pt")
    r = tsarchive("trace", os.path.join(TESTDATA, "mlp_scripted.pt"), "--method", "scaled", "--input", "2x8", "-o", dest)
    check(r.returncode == 1 and "forward" in r.stderr and "--allow-drop" in r.stderr and not os.path.exists(dest),
          f"trace scaled without --allow-drop: exit {r.returncode} {r.stderr}")
    r = tsarchive("trace", os.path.join(TESTDATA, "mlp_scripted.pt"), "--method", "scaled", "--input", "2x8", "-o", dest,
                  "--allow-drop")
    check(r.returncode == 0, f"trace scaled: exit {r.returncode} {r.stderr}")
    check("lacks the original's method(s) forward" in r.stderr, f"trace scaled names the dropped method: {r.stderr}")
    if r.returncode == 0:
        traced, original = torch.jit.load(dest), torch.jit.load(os.path.join(TESTDATA, "mlp_scripted.pt")).eval()
        check([a.name for a in traced.scaled.schema.arguments] == ["self", "x"], f"trace scaled: {traced.scaled.schema}")
        with torch.no_grad():
            check(close(traced.scaled(seeded("2x8", 3)), original.scaled(seeded("2x8", 3))), "trace scaled: outputs")

    # The loop model: flagged both ways, and Python confirms the trace is wrong elsewhere.
    dest = out("loop_traced.pt")
    r = tsarchive("trace", model("value_loop"), "--input", "2x3", "--check-inputs", "8", "-o", dest, "--json")
    check(r.returncode == 0, f"trace value_loop: exit {r.returncode} {r.stderr}")
    doc = json.loads(r.stdout)
    kinds = [w["kind"] for w in doc["warnings"]]
    check("fresh-inputs" in kinds and "value-control-flow" in kinds, f"loop trace flagged: {kinds}")
    check(doc["fresh_inputs"]["mismatched"] > 0, f"loop trace: fresh {doc['fresh_inputs']}")
    check(sum(1 for l in r.stderr.splitlines() if l.startswith("tsarchive: warning: ")) == len(kinds),
          f"loop trace: one warning line each: {r.stderr}")
    traced, original = torch.jit.load(dest), torch.jit.load(model("value_loop"))
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # six positive values; the example has fewer
    check(not close(traced(x), original(x)), "Python: the loop trace should differ from the original")
    strict_dir = out("strict")
    os.mkdir(strict_dir)
    r = tsarchive("trace", model("value_loop"), "--input", "2x3", "--strict", "-o", os.path.join(strict_dir, "t.pt"))
    check(r.returncode == 1 and os.listdir(strict_dir) == [], f"--strict: exit {r.returncode}, {os.listdir(strict_dir)}")
    one_error_line(r, "--strict")

    # --- inspect --ops equals Python's export_opnames ---
    for name, fact in EXPECTED.items():
        r = tsarchive("inspect", model(name), "--ops", "--json")
        check(r.returncode == 0, f"--ops {name}: {r.stderr}")
        if r.returncode == 0 and fact["export_opnames"] is None:
            # Python's export_opnames throws too: the graphs are scanned instead, and a note says so.
            doc = json.loads(r.stdout)
            check(doc["source"] == "graph scan" and fact["export_opnames_error"].rstrip(".") in doc["notes"][0],
                  f"--ops {name} fallback: {doc}")
            check({"aten::neg", "aten::add.Tensor"} <= set(doc["operators"]), f"--ops {name}: {doc['operators']}")
            check(r.stderr.startswith("tsarchive: note: "), f"--ops {name}: the note on stderr: {r.stderr}")
        elif r.returncode == 0:
            doc = json.loads(r.stdout)
            check(doc["schema"] == "tsarchive.ops/1" and doc["operators"] == fact["export_opnames"],
                  f"--ops {name}: {doc['operators']} vs Python {fact['export_opnames']}")
    r = tsarchive("inspect", model("convnet"), "--ops")
    yaml_ops = [l[2:] for l in r.stdout.splitlines() if l.startswith("- ")]
    check(yaml_ops == EXPECTED["convnet"]["export_opnames"], f"--ops YAML: {r.stdout}")
    check(all(l.startswith(("- ", "#")) for l in r.stdout.splitlines()), f"--ops YAML lines: {r.stdout}")

    # --- inspect --graph: libtorch's own printing, inlined, DOT ---
    r = tsarchive("inspect", model("value_loop"), "--graph")
    check(r.returncode == 0 and r.stdout == str(torch.jit.load(model("value_loop")).graph),
          f"--graph equals Python's .graph: {r.stdout[:300]}")
    r = tsarchive("inspect", model("mlp_bn"), "--graph", "--inlined")
    check(r.returncode == 0 and "prim::CallMethod" not in r.stdout and "aten::batch_norm" in r.stdout,
          f"--graph --inlined: {r.stdout[:300]}")
    r = tsarchive("inspect", model("value_loop"), "--graph", "--format", "dot")
    check(r.returncode == 0 and r.stdout.startswith("digraph") and "cluster_" in r.stdout, f"DOT: {r.stdout[:200]}")
    if shutil.which("dot"):
        for name in EXPECTED:
            dot_text = tsarchive("inspect", model(name), "--graph", "--format", "dot").stdout
            svg = subprocess.run(["dot", "-Tsvg"], input=dot_text, capture_output=True, text=True)
            check(svg.returncode == 0 and "<svg" in svg.stdout, f"dot rejects {name}'s DOT: {svg.stderr}")
    else:
        print("note: graphviz's dot is not installed; the DOT is not checked by dot")

    # inspect without --graph/--ops never loads libtorch; with them it must.
    env = dict(os.environ, TSARCHIVE_TORCH_LIBRARY=out("no-such-library.so"))
    check(tsarchive("inspect", model("convnet"), env=env).returncode == 0, "plain inspect needs no libtorch")
    check(tsarchive("inspect", model("convnet"), "--ops", env=env).returncode == 5, "--ops needs libtorch (exit 5)")

    # --- bad input: one line, the documented exit code, nothing written ---
    bad_dir = out("bad")
    os.mkdir(bad_dir)
    dest = os.path.join(bad_dir, "x.pt")
    for what, args, code in [
        ("missing method", ["trace", model("gru"), "--method", "nope", "--input", "1x5x4", "-o", dest], 2),
        ("too many inputs", ["convert", model("gru"), "--input", "1x5x4", "--input", "2", "-o", dest], 2),
        ("input of the wrong type", ["trace", model("gru"), "--input", "json:3", "-o", dest], 2),
        ("no inputs", ["convert", model("gru"), "--freeze", "-o", dest], 2),
        ("a trace that throws", ["trace", model("labelled"), "--input", "2x3", "-o", dest], 5),
        ("a .ptl to convert", ["convert", ptl, "--input", "1x3x32x32", "-o", dest], 3),
        ("not an archive", ["trace", os.path.join(JIT, "expected.json"), "--input", "2x3", "-o", dest], 3),
        ("inference and mobile", ["convert", model("gru"), "--input", "1x5x4", "--mobile",
                                  "--optimize-for-inference", "-o", dest], 2),
        ("--graph of a missing method", ["inspect", model("gru"), "--graph", "--method", "nope"], 2),
    ]:
        r = tsarchive(*args)
        check(r.returncode == code, f"{what}: exit {r.returncode}, wanted {code}: {r.stderr}")
        one_error_line(r, what)
        check(os.listdir(bad_dir) == [], f"{what}: left {os.listdir(bad_dir)}")

    # A model that keeps state between calls (a streaming RNN, silero-vad):
    # what convert and trace write holds the file's state, not the state
    # their own check run left, and its first call gives the original's.
    class Stateful(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", torch.zeros(1))
            self.state = torch.zeros(4)

        def forward(self, x):
            self.calls += 1
            self.state = self.state + x.sum()
            return x * self.calls + self.state.sum()

    stateful = out("stateful.pt")
    torch.jit.script(Stateful()).save(stateful)
    want = torch.jit.load(stateful)(seeded("4"))
    for command, flags in [("convert", []), ("convert", ["--freeze"]), ("trace", [])]:
        dest = out(f"stateful_{command}{'_'.join(flags)}.pt")
        r = tsarchive(command, stateful, "--input", "4", *flags, "-o", dest)
        check(r.returncode == 0, f"{command} {flags} of a stateful model: exit {r.returncode}: {r.stderr}")
        check(command == "trace" or "changes its own state" in r.stderr, f"{command} {flags}: no note: {r.stderr}")
        written = torch.jit.load(dest)
        check(written.calls.item() == 0, f"{command} {flags}: the check run's state was saved: calls={written.calls}")
        check(close(written(seeded("4")), want), f"{command} {flags}: the first call differs from the original's")

    # Outputs outside tolerance: exit 1, one line, nothing written. Which
    # freeze is not bit-exact depends on the libtorch (conv+bn folding rounds
    # differently in 1.13 and 2.x), so both are tried; at least one must differ.
    refused = 0
    for name in ("convnet", "mlp_bn"):
        spec = EXPECTED[name]["input"]
        r = tsarchive("convert", model(name), "--input", spec, "--freeze", "--atol", "0", "--rtol", "0", "-o", dest)
        if r.returncode == 0:
            os.remove(dest)
            continue
        refused += 1
        check(r.returncode == 1, f"outputs outside tolerance ({name}): exit {r.returncode}, wanted 1: {r.stderr}")
        one_error_line(r, "outputs outside tolerance")
        check(os.listdir(bad_dir) == [], f"outputs outside tolerance: left {os.listdir(bad_dir)}")
    check(refused > 0, "no --freeze at --atol 0 --rtol 0 was refused")

    # convert's default atol grows with the output's largest |value| (freezing reassociates float
    # arithmetic, whose rounding follows the magnitudes: an element near zero in an output that
    # reaches +-47 is off by some 1e-5 in torch.jit.freeze itself); a --atol given is taken as it is.
    spec = EXPECTED["value_loop"]["input"]
    largest = float(torch.jit.load(model("value_loop"))(seeded(spec)).abs().max())
    for flags, atol, scaled in [([], 1e-5 * max(1.0, largest), True), (["--atol", "1e-5"], 1e-5, False)]:
        r = tsarchive("convert", model("value_loop"), "--input", spec, *flags, "--json", "-o", out("scaled.pt"))
        checks = json.loads(r.stdout)["checks"] if r.returncode == 0 else []
        check(r.returncode == 0 and len(checks) == 1, f"convert {flags}: exit {r.returncode}: {r.stderr}")
        for c in checks:
            check(abs(c["atol"] - atol) <= 1e-6 * atol and c.get("atol_scaled", False) == scaled,
                  f"convert {flags}: atol {c['atol']} (scaled {c.get('atol_scaled')}), wanted {atol} ({scaled})")
        if os.path.exists(out("scaled.pt")):
            os.remove(out("scaled.pt"))

    # A .ptl that keeps code/ (convert --lite writes it) has graphs, as
    # torch.jit.load(x.ptl).graph does (pytorch.compat compares them).
    r = tsarchive("inspect", ptl, "--graph")
    check(r.returncode == 0 and "graph(" in r.stdout, f"--graph of a .ptl with code/: exit {r.returncode} {r.stderr}")

    # -o naming the input: refused before any work; the input keeps its bytes.
    same_dir = out("same")
    os.mkdir(same_dir)
    same = shutil.copy(model("gru"), os.path.join(same_dir, "gru.pt"))
    r = tsarchive("convert", same, "--input", "1x5x4", "--freeze", "-o", os.path.join(same_dir, ".", "gru.pt"))
    check(r.returncode == 2 and "(the same file)" in r.stderr, f"-o the input: exit {r.returncode} {r.stderr}")
    one_error_line(r, "-o the input")
    check(open(same, "rb").read() == open(model("gru"), "rb").read() and os.listdir(same_dir) == ["gru.pt"],
          "-o the input: the input changed or something was left")

finish("all JIT checks passed")
