#!/usr/bin/python3
"""`tsarchive serve` answers the Open Inference Protocol as PyTorch would.

Run by CTest with TSARCHIVE_PYTHON (exit 77, skipped, when torch is missing):

    python3 tests/pytorch/check_serve.py TSARCHIVE TESTDATA_DIR

Starts the real binary on a free loopback port (--port 0, read back from its
start line), queries it with curl and with Python (requests when installed,
else urllib), and compares infer outputs with torch.jit.load on the same
inputs, alone and in concurrent batches. Then hostile requests (malformed
JSON, wrong names, shapes and datatypes, unknown model, oversize and chunked
bodies, a half-sent body, huge headers), each expecting its status and a
JSON error while the server keeps serving; a killed worker (500, readiness
false, restart); SIGTERM (exit 0, no worker left). tritonclient comes later.
"""

import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import harness
from harness import check, finish

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)
try:
    import requests
except ImportError:
    requests = None

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
MLP = os.path.join(TESTDATA, "mlp_scripted.pt")
CURL = shutil.which("curl")


def start(*args):
    p = subprocess.Popen([TSARCHIVE, "serve", *args, "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()  # the start line, once every model is loaded
    check(line.startswith("tsarchive serve: http://127.0.0.1:"), f"start line: {line!r}")
    url = line.split()[2][: -len("/v2")]
    errors = []
    threading.Thread(target=lambda: errors.extend(p.stderr), daemon=True).start()
    return p, url, errors


def http(method, url, body=None, headers=None):
    """(status, parsed JSON or text) by requests, or urllib without it."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    if requests is not None:
        r = requests.request(method, url, data=data, headers=headers or {}, timeout=30)
        status, text = r.status_code, r.text
    else:
        req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


def raw(url, data, wait=0.0, read=True):
    """Sends bytes on a fresh connection; returns (status, body) of the answer."""
    host, port = url[len("http://"):].split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(data)
    if wait:
        time.sleep(wait)
    reply = b""
    while read:
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
        if length and len(body) >= length[0]:
            break
    s.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split()[1]) if head else 0
    return status, body.decode(errors="replace")


def infer_body(x, name="x"):
    return {"id": "t", "inputs": [{"name": name, "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.flatten().tolist()}]}


def as_tensor(output):
    return torch.tensor(output["data"], dtype=torch.float32).reshape(output["shape"])


def still_serving(url, what):
    status, _ = http("GET", url + "/v2/health/ready")
    check(status == 200, f"after {what}: ready is {status}")


model = torch.jit.load(MLP).eval()
torch.manual_seed(0)

server, url, log = start(MLP, "--max-batch", "8", "--max-wait", "20", "--read-timeout", "1000", "--max-body", "1M")
try:
    # Health and metadata.
    check(http("GET", url + "/v2/health/live")[0] == 200, "live")
    check(http("GET", url + "/v2/health/ready")[0] == 200, "ready")
    check(http("GET", url + "/v2/models/mlp_scripted/ready")[0] == 200, "model ready")
    status, meta = http("GET", url + "/v2")
    check(status == 200 and meta["name"] == "tsarchive", f"/v2: {status} {meta}")
    status, meta = http("GET", url + "/v2/models/mlp_scripted")
    check(status == 200 and meta["inputs"][0]["name"] == "x" and meta["inputs"][0]["datatype"] == "FP32"
          and meta["outputs"][0]["name"] == "out", f"metadata: {meta}")

    # One request, by Python and by curl, against torch.jit.load.
    x = torch.randn(4, 8)
    with torch.no_grad():
        want = model(x)
    status, answer = http("POST", url + "/v2/models/mlp_scripted/infer", infer_body(x))
    check(status == 200, f"infer: {status} {answer}")
    if status == 200:
        check(answer["model_name"] == "mlp_scripted" and answer["id"] == "t", f"infer answer: {answer}")
        out = as_tensor(answer["outputs"][0])
        check(answer["outputs"][0]["datatype"] == "FP32" and out.shape == want.shape, f"infer shape: {answer}")
        check(torch.allclose(out, want, atol=1e-5, rtol=1e-4), f"infer differs from torch: {out} vs {want}")
    if CURL:
        p = subprocess.run([CURL, "-s", "-w", "\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/json",
                            "--data-binary", json.dumps(infer_body(x)), url + "/v2/models/mlp_scripted/infer"],
                           capture_output=True, text=True, timeout=60)
        body, _, code = p.stdout.rpartition("\n")
        check(code == "200", f"curl infer: {code} {body}")
        if code == "200":
            check(torch.allclose(as_tensor(json.loads(body)["outputs"][0]), want, atol=1e-5, rtol=1e-4), "curl infer differs")
    else:
        print("note: no curl; curl cases skipped")

    # Concurrent requests of 1-3 rows, batched by the server: each answer
    # equals torch on that request alone.
    inputs = [torch.randn(1 + i % 3, 8) for i in range(24)]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda t: http("POST", url + "/v2/models/mlp_scripted/infer", infer_body(t)), inputs))
    for i, (t, (status, answer)) in enumerate(zip(inputs, answers)):
        with torch.no_grad():
            alone = model(t)
        ok = status == 200 and torch.allclose(as_tensor(answer["outputs"][0]), alone, atol=1e-5, rtol=1e-4)
        check(ok, f"batched request {i}: {status} {str(answer)[:200]}")

    # Hostile requests: the status, a JSON error, and the server still serves.
    infer = url + "/v2/models/mlp_scripted/infer"
    cases = [
        ("malformed JSON", "POST", infer, b"{\"inputs\": [", 400),
        ("not an object", "POST", infer, b"[1, 2]", 400),
        ("wrong input name", "POST", infer, infer_body(torch.randn(1, 8), name="y"), 400),
        ("wrong shape", "POST", infer, infer_body(torch.randn(2, 7)), 400),
        ("values do not match the shape", "POST", infer,
         {"inputs": [{"name": "x", "shape": [2, 8], "datatype": "FP32", "data": [1.0] * 15}]}, 400),
        ("wrong datatype", "POST", infer,
         {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "INT64", "data": [1] * 8}]}, 400),
        ("unknown datatype", "POST", infer,
         {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP128", "data": [1] * 8}]}, 400),
        ("unknown model", "POST", url + "/v2/models/nope/infer", infer_body(torch.randn(1, 8)), 404),
        ("unknown model metadata", "GET", url + "/v2/models/nope", None, 404),
        ("unknown path", "GET", url + "/v3", None, 404),
        ("GET on infer", "GET", infer, None, 405),
    ]
    for what, method, target, body, want_status in cases:
        status, answer = http(method, target, body, {"Content-Type": "application/json"})
        check(status == want_status and isinstance(answer, dict) and "error" in answer,
              f"{what}: {status} {answer}, wanted {want_status} with an error")
        still_serving(url, what)

    hostile_raw = [
        ("oversize body", b"POST /v2/models/mlp_scripted/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n{", 413),
        ("chunked body", b"POST /v2/models/mlp_scripted/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"2\r\n{}\r\n0\r\n\r\n", 411),
        ("huge headers", b"GET /v2 HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431),
        ("half-sent body", b"POST /v2/models/mlp_scripted/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inp", 408),
        ("half-sent headers", b"GET /v2 HTTP/1.1\r\nHost: x\r\n", 408),
        ("no Host", b"GET /v2 HTTP/1.1\r\n\r\n", 400),
        ("garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
    ]
    for what, data, want_status in hostile_raw:
        started = time.monotonic()
        status, body = raw(url, data)
        check(status == want_status and '"error"' in body, f"{what}: {status} {body[:200]}, wanted {want_status}")
        if want_status == 408:
            check(time.monotonic() - started < 5, f"{what}: answered after {time.monotonic() - started:.1f} s")
        still_serving(url, what)
    if CURL:
        p = subprocess.run([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Transfer-Encoding: chunked",
                            "--data-binary", "{}", infer], capture_output=True, text=True, timeout=60)
        check(p.stdout == "411", f"curl chunked: {p.stdout}")

    # A killed worker: its requests fail, readiness is false, it comes back.
    workers = [int(pid) for pid in os.listdir("/proc") if pid.isdigit()
               and open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[1:2] == [b"__model-worker"]
               and f"PPid:\t{server.pid}\n" in open(f"/proc/{pid}/status").read()]
    check(len(workers) == 1, f"one worker under the server: {workers}")
    if workers:
        os.kill(workers[0], signal.SIGKILL)
        time.sleep(0.05)
        status, answer = http("POST", infer, infer_body(torch.randn(1, 8)))
        check(status in (500, 503), f"request to a killed worker: {status} {answer}")
        back = False
        for _ in range(100):
            if http("GET", url + "/v2/models/mlp_scripted/ready")[0] == 200:
                back = True
                break
            time.sleep(0.1)
        check(back, "the worker came back within 10 s")
        status, answer = http("POST", infer, infer_body(x))
        check(status == 200 and torch.allclose(as_tensor(answer["outputs"][0]), want, atol=1e-5, rtol=1e-4),
              f"infer after the restart: {status}")

    # SIGTERM: exit 0, nothing left behind.
    server.send_signal(signal.SIGTERM)
    check(server.wait(timeout=20) == 0, f"exit status after SIGTERM: {server.returncode}")
    text = "".join(log)
    check("SIGKILL" in text and "restarting its worker" in text, f"one log line for the crash: {text!r}")
    time.sleep(0.2)
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and os.path.exists(f"/proc/{pid}/status")
            and f"PPid:\t{server.pid}\n" in open(f"/proc/{pid}/status").read()]
    check(not left, f"processes left after SIGTERM: {left}")
finally:
    if server.poll() is None:
        server.kill()

# The gate: a damaged archive is refused before any worker sees it.
with tempfile.TemporaryDirectory() as tmp:
    damaged = os.path.join(tmp, "damaged.pt")
    data = bytearray(open(MLP, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(damaged, "wb").write(bytes(data))
    harness.tsarchive(TSARCHIVE, "serve", damaged, "--port", "0", want=3, timeout=60)
harness.tsarchive(TSARCHIVE, "serve", "bad/name=" + MLP, want=2, timeout=60)
harness.tsarchive(TSARCHIVE, "serve", "a=" + MLP, "a=" + MLP, want=2, timeout=60)

finish("serve: health, metadata, infer (alone, curl, batched) equal torch.jit; hostile requests refused; "
       "a killed worker restarts; SIGTERM exits 0")
