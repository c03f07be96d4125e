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
false, restart); GET /metrics (checked by promtool when installed, and its
counts against the requests made); SIGTERM (exit 0, no worker left). Then a
full queue (503 with Retry-After) and a request queued past --timeout (504)
while the model worker is stopped (SIGSTOP, so no step depends on the
machine's speed); on a slow model scripted here, SIGTERM finishing queued requests within
--grace and failing them after it, --instances spreading requests over
workers; metadata shapes from a recorded self-check, and --ready-check.
Non-tensor parameters (multi_io.pt, and a str parameter scripted here) in
the request's "parameters" and as inputs (BYTES too), alone and batched,
against torch.jit, and their 400s.
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
from typing import Optional

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
PROMTOOL = shutil.which("promtool")


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


def metrics(url):
    """GET /metrics: its text, checked by promtool, and {(name, labels): value}."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        check(r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4"),
              f"/metrics: {r.status} {r.headers['Content-Type']}")
        text = r.read().decode()
    if PROMTOOL:
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, f"promtool check metrics: {p.stdout}{p.stderr}")
    values = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        series, value = line.rsplit(" ", 1)
        name, _, labels = series.partition("{")
        values[(name, labels.rstrip("}"))] = float(value)
    return text, values


def children_of(server, worker_only=False):
    """Processes whose parent is the server (its model workers with
    worker_only); processes that end while /proc is read are left out."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                if f"PPid:\t{server.pid}\n" not in f.read():
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if worker_only and f.read().split(b"\0")[1:2] != [b"__model-worker"]:
                    continue
        except OSError:
            continue
        found.append(int(pid))
    return found


def workers_of(server):
    return children_of(server, worker_only=True)


def still_serving(url, what):
    status, _ = http("GET", url + "/v2/health/ready")
    check(status == 200, f"after {what}: ready is {status}")


model = torch.jit.load(MLP).eval()
torch.manual_seed(0)

server, url, log = start(MLP, "--max-batch", "8", "--max-wait", "20", "--header-timeout", "1000", "--read-timeout", "1000",
                         "--max-body", "1M")
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

    # The binary tensor data extension, by hand: the input's bytes after the
    # JSON, the output asked for as bytes.
    header = json.dumps({"inputs": [{"name": "x", "shape": [4, 8], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 128}}],
                         "outputs": [{"name": "out", "parameters": {"binary_data": True}}]}).encode()
    req = urllib.request.Request(url + "/v2/models/mlp_scripted/infer", data=header + x.numpy().tobytes(), method="POST",
                                 headers={"Inference-Header-Content-Length": str(len(header)),
                                          "Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(req, timeout=30) as r:
        size = int(r.headers["Inference-Header-Content-Length"])
        reply = r.read()
    answer = json.loads(reply[:size])
    check(answer["outputs"][0]["parameters"]["binary_data_size"] == len(reply) - size, f"binary answer: {answer}")
    out = torch.frombuffer(bytearray(reply[size:]), dtype=torch.float32).reshape(answer["outputs"][0]["shape"])
    check(torch.allclose(out, want, atol=1e-5, rtol=1e-4), f"binary infer differs from torch: {out} vs {want}")

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
        ("BYTES", "POST", infer, {"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": ["a"]}]}, 400),
        ("binary_data_size without the header", "POST", infer,
         {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "parameters": {"binary_data_size": 32}}]}, 400),
        ("unknown model", "POST", url + "/v2/models/nope/infer", infer_body(torch.randn(1, 8)), 404),
        ("unknown model metadata", "GET", url + "/v2/models/nope", None, 404),
        ("unknown path", "GET", url + "/v3", None, 404),
        ("GET on infer", "GET", infer, None, 405),
        # Nested data follows the shape, level by level, or it is not the tensor's rows.
        ("ragged nested data", "POST", infer,
         {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [[1.0], [1.0] * 7]}]}, 400),
        ("transposed nested data", "POST", infer,
         {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [[1.0]] * 8}]}, 400),
        ("nested too deep", "POST", infer,
         {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [[[1.0] * 8]]}]}, 400),
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
        # At once, not after --header-timeout (10 s here).
        ("bare LF line ends", b"GET /v2 HTTP/1.1\nHost: x\n\n", 400),
        ("a bare LF after the request line", b"GET /v2 HTTP/1.1\r\nHost: x\n", 400),
    ]
    for what, data, want_status in hostile_raw:
        started = time.monotonic()
        status, body = raw(url, data)
        check(status == want_status and '"error"' in body, f"{what}: {status} {body[:200]}, wanted {want_status}")
        if want_status in (400, 408):
            check(time.monotonic() - started < 5, f"{what}: answered after {time.monotonic() - started:.1f} s")
        still_serving(url, what)

    # Nested data that follows the shape is the same tensor as flat data.
    nested = {"inputs": [{"name": "x", "shape": [2, 8], "datatype": "FP32", "data": x[:2].tolist()}]}
    status, answer = http("POST", infer, nested)
    with torch.no_grad():
        want_nested = model(x[:2])
    check(status == 200 and torch.allclose(as_tensor(answer["outputs"][0]), want_nested, atol=1e-5, rtol=1e-4),
          f"nested data: {status} {answer}")

    # HEAD is GET without the body (RFC 9110, 9.3.2), a 405 too: pipelined
    # on one kept-alive connection, each answer is a head alone, so the next
    # one is read in step.
    host, port = url[len("http://"):].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"HEAD /v2 HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"HEAD /v2/models/mlp_scripted/infer HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    heads = reply.split(b"\r\n\r\n")
    server_metadata = http("GET", url + "/v2")[1]
    check(len(heads) == 4 and heads[3] == b"" and heads[0].startswith(b"HTTP/1.1 200 ")
          and f"Content-Length: {len(json.dumps(server_metadata, separators=(',', ':')))}".encode() in heads[0]
          and heads[1].startswith(b"HTTP/1.1 405 ") and b"Allow: POST" in heads[1]
          and heads[2].startswith(b"HTTP/1.1 200 "), f"HEAD, HEAD on infer, then GET on one connection: {reply!r}")
    check(http("HEAD", url + "/v2/health/ready")[0] == 200, "HEAD /v2/health/ready")

    # A 404 echoes at most 200 bytes of the version asked for, as of the model's name.
    status, answer = http("GET", url + "/v2/models/mlp_scripted/versions/" + "v" * 5000)
    check(status == 404 and isinstance(answer, dict) and "v" * 200 in answer["error"] and len(answer["error"]) < 400,
          f"an unknown version of 5000 bytes: {status} {str(answer)[:300]}")
    if CURL:
        p = subprocess.run([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Transfer-Encoding: chunked",
                            "--data-binary", "{}", infer], capture_output=True, text=True, timeout=60)
        check(p.stdout == "411", f"curl chunked: {p.stdout}")

    # A killed worker: its requests fail, readiness is false, it comes back.
    workers = workers_of(server)
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

    # /metrics: valid exposition text whose counts match what was sent.
    text, values = metrics(url)
    m = 'model="mlp_scripted"'
    ok = values.get(("tsarchive_serve_requests_total", m + ',status="200"'), 0)
    check(ok >= 27, f"requests answered 200 in /metrics: {ok}, at least 27 were")
    bad = values.get(("tsarchive_serve_requests_total", m + ',status="400"'), 0)
    check(bad >= 8, f"requests answered 400 in /metrics: {bad}")
    check(values.get(("tsarchive_serve_worker_restarts_total", m)) == 1, "one worker restart in /metrics")
    check(values.get(("tsarchive_serve_queue_depth", m)) == 0, "queue depth 0 in /metrics")
    check(values.get(("tsarchive_serve_model_ready", m)) == 1, "ready in /metrics")
    calls = values.get(("tsarchive_serve_batch_size_count", m), 0)
    check(0 < calls < ok and values.get(("tsarchive_serve_batch_size_sum", m), 0) > calls,
          f"some calls ran batches of several requests: {calls} calls")
    for family in ("request", "queue", "compute"):
        check(values.get((f"tsarchive_serve_{family}_seconds_count", m), 0) > 0, f"{family} latency histogram")
    check("operator" not in text, "no operator metrics without --sample")
    check(http("POST", url + "/metrics", b"")[0] == 405, "POST /metrics is 405")

    # SIGTERM: exit 0, nothing left behind.
    server.send_signal(signal.SIGTERM)
    check(server.wait(timeout=20) == 0, f"exit status after SIGTERM: {server.returncode}")
    text = "".join(log)
    check("SIGKILL" in text and "restarting its worker" in text, f"one log line for the crash: {text!r}")
    time.sleep(0.2)
    left = children_of(server)
    check(not left, f"processes left after SIGTERM: {left}")
finally:
    if server.poll() is None:
        server.kill()

# --sample 1: every operator call of the served method is observed, tagged
# with the model's name; /metrics gives them (two linear layers per call).
server, url, log = start(MLP, "--sample", "1")
try:
    for _ in range(10):
        status, _ = http("POST", url + "/v2/models/mlp_scripted/infer", infer_body(torch.randn(1, 8)))
        check(status == 200, f"infer with --sample: {status}")
    text, values = metrics(url)
    linear = 'model="mlp_scripted",operator="aten::linear",scope="function"'
    check(values.get(("tsarchive_serve_operator_calls_total", linear)) == 20
          and values.get(("tsarchive_serve_operator_sampled_calls_total", linear)) == 20,
          f"aten::linear calls in /metrics: {[l for l in text.splitlines() if 'aten::linear' in l]}")
    total = values.get(("tsarchive_serve_operator_seconds_total", linear), 0)
    own = values.get(("tsarchive_serve_operator_self_seconds_total", linear), 0)
    check(0 < own <= total, f"aten::linear self {own} s within total {total} s")
    check(values.get(("tsarchive_serve_operator_sample_probability", 'model="mlp_scripted"')) == 1, "probability 1")
    # torch::jit::load fires torch.script.load in 1.13, torch.jit.load in 2.x.
    keys = {k[1] for k in values if k[0] == "tsarchive_serve_api_usage"}
    check({'model="mlp_scripted",key="torch.script.load"', 'model="mlp_scripted",key="torch.jit.load"'} & keys,
          f"the API usage key of torch::jit::load: {keys}")
finally:
    server.kill()
    server.wait()


class Slow(torch.nn.Module):
    """Returns x + 1 after x[0, 0] rounds of 256x256 matrix products: its
    requests take as long as the test asks."""

    def forward(self, x):
        a = torch.eye(256) + 0.001
        for _ in range(int(x[0, 0].item())):
            a = torch.mm(a, a) / a.norm()
        return x + 1 + 0 * a.sum()


def wait_for_depth(url, model, depth, taken=0, seconds=60):
    """Whether /metrics shows `model`'s queue at `depth` with at least `taken`
    requests taken from it (tsarchive_serve_queue_seconds counts a request
    when its call begins) within `seconds`."""
    labels = f'model="{model}"'
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _, values = metrics(url)
        if (values.get(("tsarchive_serve_queue_depth", labels)) == depth
                and values.get(("tsarchive_serve_queue_seconds_count", labels), 0) >= taken):
            return True
        time.sleep(0.05)
    return False


def cpu_ticks(pid):
    return sum(int(v) for v in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[11:13])


def rounds_for(seconds, url):
    """Rounds of Slow that take about `seconds` here (the machine may be loaded),
    timed after the warm-up calls in which TorchScript's profiling executor
    optimizes the graph."""
    for _ in range(3):
        http("POST", url + "/v2/models/slow/infer", infer_body(torch.full((1, 4), 2.0)))
    started = time.monotonic()
    status, _ = http("POST", url + "/v2/models/slow/infer", infer_body(torch.full((1, 4), 40.0)))
    check(status == 200, f"timing the slow model: {status}")
    per_round = max((time.monotonic() - started) / 40, 1e-5)
    return max(2, int(seconds / per_round))


def post_later(url, rounds, into, delay=0.0):
    def go():
        time.sleep(delay)
        req = urllib.request.Request(url + "/v2/models/slow/infer", method="POST",
                                     data=json.dumps(infer_body(torch.full((1, 4), float(rounds)))).encode())
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                into.append((r.status, dict(r.headers), r.read().decode()))
        except urllib.error.HTTPError as e:
            into.append((e.code, dict(e.headers), e.read().decode()))
        except OSError as e:
            into.append((0, {}, str(e)))
    t = threading.Thread(target=go)
    t.start()
    return t


with tempfile.TemporaryDirectory() as tmp:
    slow = os.path.join(tmp, "slow.pt")
    torch.jit.script(Slow()).save(slow)

    # A full queue answers 503 with Retry-After at once; a request still
    # queued after --timeout answers 504 without running. The one model
    # worker is stopped (SIGSTOP) while the first request is sent to it, and
    # the queue's depth is read from /metrics, so each request is known to be
    # running, queued or refused before the next is sent: no step depends on
    # how fast the machine is. SIGCONT lets the worker answer.
    server, url, log = start(slow, "--threads", "1", "--max-queue", "1", "--timeout", "2000")
    running, queued, refused = [], [], []
    threads = []
    worker = workers_of(server)
    check(len(worker) == 1, f"one model worker: {worker}")
    os.kill(worker[0], signal.SIGSTOP)
    try:
        threads.append(post_later(url, 2, running))
        check(wait_for_depth(url, "slow", 0, taken=1), "the first request was taken by the stopped worker")
        queued_at = time.monotonic()
        threads.append(post_later(url, 2, queued))
        check(wait_for_depth(url, "slow", 1, taken=1), "the second request waits in the queue")
        threads.append(post_later(url, 2, refused))
        threads[-1].join()
        check(refused and refused[0][0] == 503 and refused[0][1].get("Retry-After") == "1"
              and "--max-queue" in refused[0][2], f"a full queue: {refused}")
        check(not running and not queued, f"the running and the queued request still wait: {running} {queued}")
        time.sleep(max(0.0, 2.2 - (time.monotonic() - queued_at)))  # the queued one is past --timeout now
    finally:
        os.kill(worker[0], signal.SIGCONT)
        for t in threads:
            t.join()
    try:
        check(running and running[0][0] == 200, f"the running request: {running}")
        check(queued and queued[0][0] == 504 and "--timeout" in queued[0][2], f"a request queued past --timeout: {queued}")
        _, values = metrics(url)
        for status in (200, 503, 504):
            check(values.get(("tsarchive_serve_requests_total", f'model="slow",status="{status}"'), 0) >= 1,
                  f"/metrics counts a {status}")
    finally:
        server.kill()
        server.wait()

    # SIGTERM with --grace: the listener closes, the running and queued
    # requests finish, exit 0.
    server, url, log = start(slow, "--threads", "1", "--grace", "20000")
    try:
        rounds = rounds_for(2.0, url)
        answers = []
        threads = [post_later(url, rounds, answers), post_later(url, rounds, answers, 0.3)]
        time.sleep(1.0)
        server.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        refused = []
        post_later(url, 2, refused).join()
        check(refused and refused[0][0] == 0, f"a new connection after SIGTERM is refused: {refused}")
        for t in threads:
            t.join()
        check(sorted(a[0] for a in answers) == [200, 200], f"requests in flight and queued at SIGTERM: {answers}")
        check(server.wait(timeout=60) == 0, f"exit status after SIGTERM: {server.returncode}")
    finally:
        if server.poll() is None:
            server.kill()

    # A grace period that ends first: the running request gets 503 (the
    # server is shutting down, not a crash: its worker is killed and not
    # restarted), the server still exits 0, at once. The request is known
    # to run (taken from the queue, per /metrics) before SIGTERM, and it runs
    # far longer than --grace.
    server, url, log = start(slow, "--threads", "1", "--grace", "300")
    try:
        rounds = rounds_for(5.0, url)
        answers = []
        taken = 4  # by rounds_for
        thread = post_later(url, rounds * 20, answers)
        check(wait_for_depth(url, "slow", 0, taken=taken + 1), "the long request was taken from the queue")
        stopped = time.monotonic()
        server.send_signal(signal.SIGTERM)
        thread.join()
        check(answers and answers[0][0] == 503 and answers[0][1].get("Retry-After") == "1"
              and "still running when --grace ended" in answers[0][2],
              f"a request still running when --grace ended: {answers}")
        check(server.wait(timeout=30) == 0, f"exit status after --grace: {server.returncode}")
        check(time.monotonic() - stopped < 3, f"exited {time.monotonic() - stopped:.1f} s after SIGTERM")
        text = "".join(log)
        check("--grace" in text, f"one line says --grace ended: {text!r}")
        check("crashed" not in text and "restart" not in text, f"no crash or restart is logged: {text!r}")
    finally:
        if server.poll() is None:
            server.kill()

    # --instances 2: two workers, both take requests; one killed, the other
    # goes on serving while it restarts.
    server, url, log = start(slow, "--threads", "1", "--instances", "2")
    try:
        workers = workers_of(server)
        check(len(workers) == 2, f"two workers: {workers}")
        rounds = rounds_for(1.0, url)
        before = {pid: cpu_ticks(pid) for pid in workers}
        answers = []
        threads = [post_later(url, rounds, answers) for _ in range(4)]
        for t in threads:
            t.join()
        check([a[0] for a in answers] == [200] * 4, f"4 requests on 2 instances: {answers}")
        used = {pid: cpu_ticks(pid) - before[pid] for pid in workers}
        check(all(ticks > 0 for ticks in used.values()), f"both workers ran requests (CPU ticks): {used}")
        os.kill(workers[0], signal.SIGKILL)
        # Readiness turns false once the death is seen (within 0.1 s when idle,
        # later on a loaded machine) and stays so through the 0.1 s back-off and
        # the restart's load: poll for it rather than look once after a sleep.
        down = any(http("GET", url + "/v2/models/slow/ready")[0] == 400 or time.sleep(0.02) for _ in range(250))
        check(down, "not ready while a worker is down")
        status, answer = http("POST", url + "/v2/models/slow/infer", infer_body(torch.full((1, 4), 2.0)))
        check(status == 200, f"the other instance serves while one restarts: {status} {answer}")
        back = any(http("GET", url + "/v2/models/slow/ready")[0] == 200 or time.sleep(0.1) for _ in range(100))
        check(back, "the killed instance came back")
        _, values = metrics(url)
        check(values.get(("tsarchive_serve_instances", 'model="slow"')) == 2, "/metrics: 2 instances")
        check(values.get(("tsarchive_serve_worker_restarts_total", 'model="slow"')) == 1, "/metrics: 1 restart")
    finally:
        server.kill()
        server.wait()

    # Metadata shapes: -1 for the batch dimension and the recorded sizes of a
    # self-check (run --record); [-1] without one.
    checked = os.path.join(tmp, "checked.pt")
    shutil.copy(MLP, checked)
    harness.tsarchive(TSARCHIVE, "run", checked, "--input", "2x8", "--record", timeout=120)
    server, url, log = start(checked, MLP)
    try:
        with torch.no_grad():
            out_size = model(torch.randn(2, 8)).shape[1]
        status, meta = http("GET", url + "/v2/models/checked")
        check(status == 200 and meta["inputs"][0]["shape"] == [-1, 8] and meta["outputs"][0]["shape"] == [-1, out_size],
              f"metadata shapes from the recorded check: {meta}")
        status, meta = http("GET", url + "/v2/models/mlp_scripted")
        check(status == 200 and meta["inputs"][0]["shape"] == [-1], f"metadata shapes without a check: {meta}")
    finally:
        server.kill()
        server.wait()

    # --ready-check: the recorded check replays before serving; one without
    # a check is served with a warning; a failing check serves nothing (exit 1).
    server, url, log = start(checked, MLP, "--ready-check")
    try:
        check(http("GET", url + "/v2/health/ready")[0] == 200, "ready after --ready-check")
        time.sleep(0.2)
        text = "".join(log)
        check("model 'checked' passed its recorded self-check" in text
              and "model 'mlp_scripted' has no recorded self-check" in text, f"--ready-check lines: {text!r}")
    finally:
        server.kill()
        server.wait()
    wrong = os.path.join(tmp, "wrong.pt")
    torch.save(torch.ones(2, out_size), wrong)
    harness.tsarchive(TSARCHIVE, "extra", "set", checked, "tsarchive/check_outputs.pt=@" + wrong, timeout=60)
    p = harness.tsarchive(TSARCHIVE, "serve", checked, "--port", "0", "--ready-check", want=1, timeout=120)
    check("failed its recorded self-check" in p.stderr, f"a failing --ready-check: {p.stderr!r}")


# Non-tensor parameters, on multi_io.pt: forward(Tensor x, float scale,
# Dict[str, Tensor] opts, int n=2) -> (x * scale, {k: v + (x * scale).sum()},
# [x * scale + i for i < n]). Given in the request's "parameters" (as run's
# json: values) or as inputs (one value, INT64/FP64); answers equal
# torch.jit's for the same values, alone and in concurrent batches.
MULTI = os.path.join(TESTDATA, "run", "multi_io.pt")
multi = torch.jit.load(MULTI).eval()


def multi_body(x, parameters=None, inputs=()):
    body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.flatten().tolist()},
                       *inputs]}
    if parameters is not None:
        body["parameters"] = parameters
    return body


def multi_matches(answer, x, scale, opts, n):
    """Whether every output of a served answer equals torch.jit's."""
    with torch.no_grad():
        y, out, parts = multi(x, scale, opts, n)
    want = {"out[0]": y, **{f'out[1]["{k}"]': v for k, v in out.items()},
            **{f"out[2][{i}]": p for i, p in enumerate(parts)}}
    got = {o["name"]: torch.tensor(o["data"], dtype=torch.float32).reshape(o["shape"]) for o in answer["outputs"]}
    return got.keys() == want.keys() and all(torch.allclose(got[k], want[k], atol=1e-5, rtol=1e-4) for k in want)


server, url, log = start(MULTI, "--max-batch", "16", "--max-wait", "100")
try:
    infer = url + "/v2/models/multi_io/infer"
    status, meta = http("GET", url + "/v2/models/multi_io")
    shapes = {i["name"]: (i["datatype"], i["shape"]) for i in meta["inputs"]}
    check(status == 200 and shapes == {"x": ("FP32", [-1]), "scale": ("FP64", [1]), "opts": ("Dict[str, Tensor]", [-1]),
                                       "n": ("INT64", [1])}, f"multi_io metadata: {meta}")
    x = torch.randn(2, 3)
    # In "parameters": n left out (its default, 2), a tensor in a dict as a spec.
    status, answer = http("POST", infer, multi_body(x, {"scale": 0.5, "opts": {"a": "1x3:float32:ones"}}))
    check(status == 200 and multi_matches(answer, x, 0.5, {"a": torch.ones(1, 3)}, 2),
          f"parameters scale, opts (n by default): {status} {answer}")
    # An int where a float is wanted, as run converts it; the protocol's own
    # binary_data_output beside the method's parameters.
    status, answer = http("POST", infer, multi_body(x, {"scale": 2, "opts": {}, "n": 3, "binary_data_output": False}))
    check(status == 200 and multi_matches(answer, x, 2.0, {}, 3), f"parameters scale=2, n=3: {status} {answer}")
    # As inputs: FP64 shape [1] and INT64 shape [] (one value each).
    inputs = [{"name": "scale", "datatype": "FP64", "shape": [1], "data": [1.5]},
              {"name": "n", "datatype": "INT64", "shape": [], "data": [1]}]
    status, answer = http("POST", infer, multi_body(x, {"opts": {}}, inputs))
    check(status == 200 and multi_matches(answer, x, 1.5, {}, 1), f"scale and n as inputs: {status} {answer}")

    # Wrong values: 400 naming the parameter, and the server keeps serving.
    for what, body, words in [
        ("a string for a float", multi_body(x, {"scale": "big", "opts": {}}), ["scale", "float"]),
        ("a float for an int", multi_body(x, {"scale": 1.0, "opts": {}, "n": 2.5}), ["'n'", "int"]),
        ("a list for a dict", multi_body(x, {"scale": 1.0, "opts": [1, 2]}), ["opts", "Dict"]),
        ("scale missing", multi_body(x, {"opts": {}}), ["'scale' is missing"]),
        ("an unknown parameter", multi_body(x, {"scale": 1.0, "opts": {}, "scal": 2}), ["no parameter 'scal'"]),
        ("a tensor in parameters", multi_body(x, {"scale": 1.0, "opts": {}, "x": [1.0]}), ["'x' is a Tensor"]),
        ("given twice", multi_body(x, {"scale": 1.0, "opts": {}}, inputs[:1]), ["'scale' is given both"]),
        ("two values for a float", multi_body(x, {"opts": {}}, [{"name": "scale", "datatype": "FP64", "shape": [2],
                                                                  "data": [1.0, 2.0]}]), ["'scale'", "one value"]),
        ("a huge generated tensor", multi_body(x, {"scale": 1.0, "opts": {"a": "10000x10000"}}), ["opts", "16777216 elements"]),
        ("an int past int64", multi_body(x, {"scale": 1.0, "opts": {}, "n": 2 ** 63}), ["'n'", "64 bits"]),
    ]:
        status, answer = http("POST", infer, body)
        message = answer.get("error", "") if isinstance(answer, dict) else ""
        check(status == 400 and all(w in message for w in words), f"{what}: {status} {answer}")
    still_serving(url, "bad parameters")

    # Concurrent requests with two values of scale: those with equal values
    # may batch, different ones never mix; each answer is its own.
    cases = [(torch.randn(1, 3), 0.5 if i % 2 else 3.0) for i in range(24)]
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda c: http("POST", infer, multi_body(c[0], {"scale": c[1], "opts": {}})), cases))
    check(all(status == 200 and multi_matches(answer, xi, scale, {}, 2)
              for (status, answer), (xi, scale) in zip(answers, cases)), "batched non-tensor parameters differ from torch")
    _, values = metrics(url)
    batches = values.get(("tsarchive_serve_batch_size_count", 'model="multi_io"'), 0)
    print(f"multi_io: {len(cases)} concurrent requests ran in {batches:.0f} worker calls")
finally:
    server.kill()
    server.wait()


class Labelled(torch.nn.Module):
    """A str parameter and an Optional[float] with a default."""

    def forward(self, x: torch.Tensor, label: str, scale: Optional[float] = None) -> torch.Tensor:
        k = 1.0 if scale is None else scale
        return x * k + float(len(label)) + (100.0 if label == "big" else 0.0)


with tempfile.TemporaryDirectory() as tmp:
    labelled_path = os.path.join(tmp, "labelled.pt")
    labelled = torch.jit.script(Labelled())
    labelled.save(labelled_path)
    server, url, log = start(labelled_path)
    try:
        infer = url + "/v2/models/labelled/infer"
        status, meta = http("GET", url + "/v2/models/labelled")
        shapes = {i["name"]: (i["datatype"], i["shape"]) for i in meta["inputs"]}
        check(status == 200 and shapes == {"x": ("FP32", [-1]), "label": ("BYTES", [1]), "scale": ("FP64", [1])},
              f"labelled metadata: {meta}")
        x = torch.randn(2, 3)

        def labelled_matches(answer, label, scale):
            with torch.no_grad():
                want = labelled(x, label, scale)
            return torch.allclose(as_tensor(answer["outputs"][0]), want, atol=1e-5, rtol=1e-4)

        # label as a BYTES input (JSON), scale left out (None).
        body = multi_body(x, inputs=[{"name": "label", "datatype": "BYTES", "shape": [1], "data": ["big"]}])
        status, answer = http("POST", infer, body)
        check(status == 200 and labelled_matches(answer, "big", None), f"label as BYTES: {status} {answer}")
        # label in the request's parameters, with scale.
        status, answer = http("POST", infer, multi_body(x, {"label": "héllo", "scale": 0.5}))
        check(status == 200 and labelled_matches(answer, "héllo", 0.5), f"label in parameters: {status} {answer}")
        # label as binary BYTES: a 4-byte little-endian length, then the bytes.
        text = "wörd".encode()
        head = json.dumps(multi_body(x, inputs=[{"name": "label", "datatype": "BYTES", "shape": [1],
                                                 "parameters": {"binary_data_size": 4 + len(text)}}])).encode()
        status, answer = http("POST", infer, head + len(text).to_bytes(4, "little") + text,
                              {"Inference-Header-Content-Length": str(len(head))})
        check(status == 200 and labelled_matches(answer, "wörd", None), f"label as binary BYTES: {status} {answer}")
        # A number for a str: 400 naming label and str.
        status, answer = http("POST", infer, multi_body(x, {"label": 3}))
        check(status == 400 and "label" in answer["error"] and "str" in answer["error"], f"3 for label: {status} {answer}")
    finally:
        server.kill()
        server.wait()


# --key, --require-signature, --require-stamp: verify's checks on the descriptor
# serve goes on to load (no window between a separate `verify` and `serve`); a
# model that fails any of them serves nothing, with verify's exit status.
with tempfile.TemporaryDirectory() as tmp:
    key, model = os.path.join(tmp, "k"), os.path.join(tmp, "m.pt")
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key + ".pem"], check=True)
    subprocess.run(["openssl", "ec", "-in", key + ".pem", "-pubout", "-out", key + ".pub"], check=True,
                   capture_output=True)
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key + "2.pem"], check=True)
    subprocess.run(["openssl", "ec", "-in", key + "2.pem", "-pubout", "-out", key + "2.pub"], check=True,
                   capture_output=True)
    shutil.copy(MLP, model)
    required = ["--key", key + ".pub", "--require-signature", "--require-stamp"]
    p = harness.tsarchive(TSARCHIVE, "serve", model, "--port", "0", *required, want=7, timeout=60)
    check("not signed" in p.stderr and p.stdout == "", f"an unsigned model: {p.stderr!r}")
    p = harness.tsarchive(TSARCHIVE, "serve", model, "--port", "0", "--require-stamp", want=1, timeout=60)
    check("not stamped by tsarchive" in p.stderr, f"an unstamped model with --require-stamp: {p.stderr!r}")
    harness.tsarchive(TSARCHIVE, "serve", model, "--port", "0", "--require-signature", want=2, timeout=60)
    harness.tsarchive(TSARCHIVE, "stamp", "-q", "--keep-bytes", model, timeout=60)
    harness.tsarchive(TSARCHIVE, "sign", "-q", "--embed", "--key", key + ".pem", model, timeout=60)
    server, url, log = start(model, *required)
    try:
        check(http("GET", url + "/v2/health/ready")[0] == 200, "a signed, stamped model is served")
        time.sleep(0.2)
        text = "".join(log)
        check("model 'm' verified: signed by key sha256:" in text and "matches its stamp" in text,
              f"serve --key's line: {text!r}")
    finally:
        server.kill()
        server.wait()
    p = harness.tsarchive(TSARCHIVE, "serve", model, "--port", "0", "--key", key + "2.pub", want=7, timeout=60)
    check("not signed by the key given" in p.stderr, f"another key: {p.stderr!r}")
    harness.tsarchive(TSARCHIVE, "extra", "set", "-q", model, "note.txt=changed after signing", timeout=60)
    p = harness.tsarchive(TSARCHIVE, "serve", model, "--port", "0", *required, want=7, timeout=60)
    check("does not cover the archive" in p.stderr and p.stdout == "", f"a model changed after signing: {p.stderr!r}")

# The gate: a damaged archive is refused before any worker sees it.
with tempfile.TemporaryDirectory() as tmp:
    damaged = os.path.join(tmp, "damaged.pt")
    data = bytearray(open(MLP, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(damaged, "wb").write(bytes(data))
    harness.tsarchive(TSARCHIVE, "serve", damaged, "--port", "0", want=3, timeout=60)
harness.tsarchive(TSARCHIVE, "serve", "bad/name=" + MLP, want=2, timeout=60)
harness.tsarchive(TSARCHIVE, "serve", "a=" + MLP, "a=" + MLP, want=2, timeout=60)

if not PROMTOOL:
    print("note: promtool (Debian's prometheus package) is not installed; /metrics was checked without it")
finish("serve: health, metadata, infer (alone, curl, batched) equal torch.jit; hostile requests refused; "
       "a killed worker restarts; /metrics; 503/504; SIGTERM with --grace; --instances; recorded shapes; --ready-check; "
       "non-tensor parameters; --key/--require-signature/--require-stamp")
