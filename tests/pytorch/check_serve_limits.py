#!/usr/bin/python3
"""`tsarchive serve` bounds what one client can take: time, memory, connections.

Run by CTest:

    python3 tests/pytorch/check_serve_limits.py TSARCHIVE TESTDATA_DIR

Starts the real binary on a free loopback port (--port 0, read back from its
start line, as check_serve.py does) and sends it what issue 30 found: a 5 MB
request of 80,000 inputs is answered (400, a repeated name) in seconds, not
minutes; a request whose parsing alone takes longer than --timeout gets 504
without running.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

from harness import check, finish

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
MLP = os.path.join(TESTDATA, "mlp_scripted.pt")
INFER = "/v2/models/mlp_scripted/infer"


def start(*args):
    p = subprocess.Popen([TSARCHIVE, "serve", MLP, *args, "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()  # the start line, once the model is loaded
    if not line.startswith("tsarchive serve: http://127.0.0.1:"):
        p.kill()
        print(f"FAIL: serve {' '.join(args)} did not start: {line!r} {p.stderr.read()}")
        sys.exit(1)
    port = int(line.split()[2].rsplit(":", 1)[1].split("/")[0])
    threading.Thread(target=lambda: p.stderr.read(), daemon=True).start()
    return p, port


def stop(server):
    server.terminate()
    check(server.wait(timeout=30) == 0, f"exit status after SIGTERM: {server.returncode}")


def read_answer(s):
    """(status, headers as a lower-cased dict, body) of one response on `s`."""
    reply = b""
    while True:
        head, sep, body = reply.partition(b"\r\n\r\n")
        if sep:
            fields = dict(l.split(b":", 1) for l in head.split(b"\r\n")[1:])
            headers = {k.strip().lower().decode(): v.strip().decode() for k, v in fields.items()}
            if len(body) >= int(headers.get("content-length", 0)):
                return int(head.split()[1]), headers, body
        chunk = s.recv(1 << 20)
        if not chunk:
            return (int(head.split()[1]) if head else 0), {}, b""
        reply += chunk


def request(port, body, extra_headers="", timeout=60):
    """POSTs `body` to the model on a fresh connection: (status, headers, body, seconds)."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        head = (f"POST {INFER} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra_headers}"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        s.sendall(head + body)
        status, headers, answer = read_answer(s)
    return status, headers, answer, time.monotonic() - began


def zeros_body(rows):
    """x of shape [rows, 8], all zeros, as JSON (2 bytes a value)."""
    data = b"0," * (rows * 8 - 1) + b"0"
    return b'{"inputs": [{"name": "x", "shape": [%d, 8], "datatype": "FP32", "data": [%s]}]}' % (rows, data)


def error_of(answer):
    try:
        return json.loads(answer)["error"]
    except (ValueError, KeyError, TypeError):
        return f"not an error body: {answer[:200]!r}"


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


# --- 1. parsing: linear in the inputs, and counted against --timeout --------------------------

server, port = start("--timeout", "20")
try:
    inputs = [{"name": f"i{i}", "shape": [1], "datatype": "FP32", "data": [0]} for i in range(80000)]
    inputs.append(inputs[0])
    body = json.dumps({"inputs": inputs}).encode()
    status, _, answer, seconds = request(port, body)
    check(status == 400 and "'i0' is given twice" in error_of(answer), f"80,000 inputs: {status} {error_of(answer)}")
    check(seconds < 10, f"80,000 inputs took {seconds:.1f} s to answer")

    # 8 MB of JSON takes far more than 20 ms to parse: the request's time is
    # spent before it would be queued.
    status, _, answer, _ = request(port, zeros_body(500000))
    check(status == 504 and "--timeout" in error_of(answer), f"parsing past --timeout: {status} {error_of(answer)}")
finally:
    stop(server)

finish("serve limits: 80,000 inputs in seconds, parsing within --timeout")
