#!/usr/bin/python3
"""Triton's own Python client, tritonclient[http], talks to `tsarchive serve`.

Run by CTest with TSARCHIVE_PYTHON (exit 77, skipped, when torch is missing
or tritonclient cannot be installed):

    python3 tests/pytorch/check_serve_triton.py TSARCHIVE TESTDATA_DIR VENV_DIR

tritonclient is not a Debian package: when this python cannot import it, the
driver pip-installs tritonclient[http] into this python's venv when it runs
in one (scripts/dev.sh torch2's .venv), else into VENV_DIR, a venv it makes
with this python's site packages (so torch stays visible), and runs itself
again (harness.install_and_rerun). On loopback only, it asks the server for
health, metadata and readiness, and runs inferences with JSON and with binary
tensors (the binary tensor data extension tritonclient uses by default),
alone and concurrently batched, comparing every answer with torch.jit.load.
"""

import os
import subprocess
import sys

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE, TESTDATA, VENV = sys.argv[1], sys.argv[2], sys.argv[3]

from harness import check, finish, install_and_rerun  # noqa: E402

try:
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
except ImportError:
    install_and_rerun(VENV, ["tritonclient[http]"], use_own_venv=True)

import concurrent.futures  # noqa: E402  (after the re-exec above)
import signal  # noqa: E402
import threading  # noqa: E402

import numpy as np  # noqa: E402

MLP = os.path.join(TESTDATA, "mlp_scripted.pt")
model = torch.jit.load(MLP).eval()
torch.manual_seed(0)


def torch_answer(x):
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


# multi_io.pt: forward(Tensor x, float scale, Dict[str, Tensor] opts, int n=2)
# -> (x * scale, {k: v + (x * scale).sum()}, [x * scale + i for i < n]).
MULTI = os.path.join(TESTDATA, "run", "multi_io.pt")
multi = torch.jit.load(MULTI).eval()

p = subprocess.Popen([TSARCHIVE, "serve", MLP, MULTI, "--port", "0", "--max-batch", "16", "--max-wait", "10"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
line = p.stdout.readline()
check(line.startswith("tsarchive serve: http://127.0.0.1:"), f"start line: {line!r}")
threading.Thread(target=lambda: list(p.stderr), daemon=True).start()
address = line.split()[2][len("http://"): -len("/v2")]
try:
    client = httpclient.InferenceServerClient(url=address, concurrency=8)
    check(client.is_server_live(), "is_server_live")
    check(client.is_server_ready(), "is_server_ready")
    check(client.is_model_ready("mlp_scripted"), "is_model_ready")
    check(not client.is_model_ready("nope"), "is_model_ready on an unknown model is false")
    meta = client.get_server_metadata()
    check(meta["name"] == "tsarchive" and "binary_tensor_data" in meta["extensions"], f"server metadata: {meta}")
    meta = client.get_model_metadata("mlp_scripted")
    check(meta["inputs"][0]["name"] == "x" and meta["inputs"][0]["datatype"] == "FP32", f"model metadata: {meta}")

    def infer(x, binary_in, binary_out):
        given = httpclient.InferInput("x", list(x.shape), "FP32")
        given.set_data_from_numpy(x, binary_data=binary_in)
        wanted = httpclient.InferRequestedOutput("out", binary_data=binary_out)
        return client.infer("mlp_scripted", [given], outputs=[wanted], request_id="r1")

    x = np.random.RandomState(0).randn(4, 8).astype(np.float32)
    for binary_in in (False, True):
        for binary_out in (False, True):
            result = infer(x, binary_in, binary_out)
            out = result.as_numpy("out")
            what = f"binary inputs {binary_in}, binary outputs {binary_out}"
            check(out is not None and out.dtype == np.float32 and out.shape == (4, 3), f"{what}: {out!r}")
            if out is not None:
                check(np.allclose(out, torch_answer(x), atol=1e-5, rtol=1e-4), f"{what}: differs from torch")
            check(result.get_response()["id"] == "r1", f"{what}: the id comes back")

    # Concurrent requests of 1-3 rows, batched by the server, sent with
    # async_infer: each answer equals torch on that request alone.
    inputs = [np.random.RandomState(i).randn(1 + i % 3, 8).astype(np.float32) for i in range(32)]
    pending = []
    for x in inputs:
        given = httpclient.InferInput("x", list(x.shape), "FP32")
        given.set_data_from_numpy(x)  # binary by default
        pending.append(client.async_infer("mlp_scripted", [given]))
    for i, (x, request) in enumerate(zip(inputs, pending)):
        out = request.get_result().as_numpy("out")
        check(out is not None and np.allclose(out, torch_answer(x), atol=1e-5, rtol=1e-4), f"async request {i} differs")

    # Non-tensor parameters: scale and opts in the request's parameters
    # (client.infer(parameters=...)), n as a binary INT64 input of shape [1].
    x = np.random.RandomState(1).randn(2, 3).astype(np.float32)
    given = httpclient.InferInput("x", list(x.shape), "FP32")
    given.set_data_from_numpy(x)
    n = httpclient.InferInput("n", [1], "INT64")
    n.set_data_from_numpy(np.array([3], dtype=np.int64))
    result = client.infer("multi_io", [given, n], parameters={"scale": 0.5, "opts": {"a": "1x3:float32:ones"}})
    with torch.no_grad():
        y, out, parts = multi(torch.from_numpy(x), 0.5, {"a": torch.ones(1, 3)}, 3)
    want = {"out[0]": y, 'out[1]["a"]': out["a"], **{f"out[2][{i}]": t for i, t in enumerate(parts)}}
    for name, tensor in want.items():
        got = result.as_numpy(name)
        check(got is not None and np.allclose(got, tensor.numpy(), atol=1e-5, rtol=1e-4),
              f"multi_io {name} with parameters differs from torch: {got!r}")
    try:
        client.infer("multi_io", [given], parameters={"scale": "big", "opts": {}})
        check(False, "a string for a float parameter was accepted")
    except InferenceServerException as e:
        check(str(e.status()) == "400" and "scale" in e.message(), f"a string for scale: {e.status()} {e.message()}")

    # The client's exceptions carry the server's status and message.
    for what, name, shape, datatype, status in [
        ("wrong input name", "y", [1, 8], "FP32", "400"),
        ("wrong shape", "x", [1, 7], "FP32", "400"),
        ("BYTES", "x", [1, 8], "BYTES", "400"),
    ]:
        given = httpclient.InferInput(name, shape, datatype)
        if datatype == "BYTES":
            given.set_data_from_numpy(np.array([[b"a"] * 8], dtype=np.object_))
        else:
            given.set_data_from_numpy(np.zeros(shape, dtype=np.float32))
        try:
            client.infer("mlp_scripted", [given])
            check(False, f"{what} was accepted")
        except InferenceServerException as e:
            check(str(e.status()) == status and e.message(), f"{what}: {e.status()} {e.message()}")
    try:
        client.get_model_metadata("nope")
        check(False, "metadata of an unknown model was given")
    except InferenceServerException as e:
        check(str(e.status()) == "404", f"unknown model: {e.status()}")
    client.close()
finally:
    p.send_signal(signal.SIGTERM)
    try:
        check(p.wait(timeout=30) == 0, f"exit status after SIGTERM: {p.returncode}")
    except subprocess.TimeoutExpired:
        p.kill()
        check(False, "the server did not stop after SIGTERM")

finish("serve: tritonclient[http] health, metadata, JSON and binary tensors, async batches, non-tensor "
       "parameters equal torch.jit")
