#!/usr/bin/python3
"""bench/serve_python.py MODEL PORT MAX_BATCH MAX_WAIT_MS MAX_QUEUE THREADS [DEVICE]

A batching server as a Python deployment would write one, for bench/serve.sh
to compare with `tsarchive serve`: an asynchronous HTTP server (aiohttp)
whose handlers put each request on a bounded queue (503 when it is full) and
await its answer, and one model-runner task that takes up to
MAX_BATCH_SIZE requests, waiting at most MAX_WAIT for more after the first,
concatenates them on dimension 0, runs torch.jit.load's module on them in a
thread (so the event loop goes on accepting), and splits the output back.
It speaks the same KServe v2 JSON infer route, so one load generator drives
both. DEVICE (default cpu; cuda, cuda:N): the module and each batch go to
that device, and the output comes back to the CPU before it is answered
(which waits for the GPU's work). Needs python3-aiohttp and python3-torch.
"""

import asyncio
import sys
import time

import torch
from aiohttp import web

MODEL, PORT = sys.argv[1], int(sys.argv[2])
MAX_BATCH_SIZE, MAX_WAIT, MAX_QUEUE_SIZE = int(sys.argv[3]), float(sys.argv[4]) / 1000, int(sys.argv[5])
torch.set_num_threads(int(sys.argv[6]))
DEVICE = sys.argv[7] if len(sys.argv) > 7 else "cpu"

model = torch.jit.load(MODEL, map_location=DEVICE).eval()
queue = None  # asyncio.Queue(MAX_QUEUE_SIZE), made on the server's loop


def run_model(x):
    with torch.no_grad():
        return model(x.to(DEVICE)).cpu()


async def model_runner():
    loop = asyncio.get_running_loop()
    while True:
        batch = [await queue.get()]
        deadline = time.monotonic() + MAX_WAIT
        rows = batch[0][0].shape[0]
        while rows < MAX_BATCH_SIZE:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                item = await asyncio.wait_for(queue.get(), timeout=left)
            except asyncio.TimeoutError:
                break
            batch.append(item)
            rows += item[0].shape[0]
        try:
            out = await loop.run_in_executor(None, run_model, torch.cat([x for x, _ in batch]))
            start = 0
            for x, future in batch:
                future.set_result(out[start:start + x.shape[0]])
                start += x.shape[0]
        except Exception as e:  # one bad request fails its batch
            for _, future in batch:
                if not future.done():
                    future.set_exception(e)


async def infer(request):
    body = await request.json()
    given = body["inputs"][0]
    x = torch.tensor(given["data"], dtype=torch.float32).reshape(given["shape"])
    if queue.full():
        return web.json_response({"error": "queue full"}, status=503, headers={"Retry-After": "1"})
    future = asyncio.get_running_loop().create_future()
    await queue.put((x, future))
    out = await future
    return web.json_response({"model_name": request.match_info["name"], "outputs": [
        {"name": "out", "datatype": "FP32", "shape": list(out.shape), "data": out.flatten().tolist()}]})


async def ready(_request):
    return web.Response(status=200)


async def start(app):
    global queue
    queue = asyncio.Queue(MAX_QUEUE_SIZE)
    app["runner"] = asyncio.get_running_loop().create_task(model_runner())


app = web.Application(client_max_size=64 << 20)
app.router.add_post("/v2/models/{name}/infer", infer)
app.router.add_get("/v2/health/ready", ready)
app.on_startup.append(start)
web.run_app(app, host="127.0.0.1", port=PORT, access_log=None, print=None)
