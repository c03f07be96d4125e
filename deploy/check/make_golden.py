"""The answer the image's smoke test expects from `serve`, computed by PyTorch.

    /usr/bin/python3 deploy/check/make_golden.py testdata/mlp_scripted.pt deploy/check
        writes infer_golden.json: Python's torch.jit.load(...)(x) for the
        input of infer_request.json, as {"shape": [...], "data": [...]}
    ... --check: exit 1 when the file differs from what this torch computes now
"""

import json
import os
import sys

try:
    import torch
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)


def expected(model_path, request):
    (tensor,) = request["inputs"]
    x = torch.tensor(tensor["data"], dtype=torch.float32).reshape(tensor["shape"])
    y = torch.jit.load(model_path)(x)
    return {"shape": list(y.shape), "data": [float(v) for v in y.flatten().tolist()]}


def main():
    model_path, folder = sys.argv[1], sys.argv[2]
    with open(os.path.join(folder, "infer_request.json")) as f:
        golden = expected(model_path, json.load(f))
    path = os.path.join(folder, "infer_golden.json")
    if "--check" in sys.argv[3:]:
        with open(path) as f:
            stored = json.load(f)
        close = stored["shape"] == golden["shape"] and all(
            abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(stored["data"], golden["data"]))
        if not close:
            print(f"FAIL: {path} holds {stored}, torch {torch.__version__} computes {golden}")
            sys.exit(1)
        print(f"{path} matches torch {torch.__version__}")
        return
    with open(path, "w") as f:
        json.dump(golden, f)
        f.write("\n")
    print("wrote", path)


main()
