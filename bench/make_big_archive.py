#!/usr/bin/python3
"""Make the large TorchScript archives that bench/inspect.sh measures.

Needs torch, so run it with Debian's interpreter:

    /usr/bin/python3 bench/make_big_archive.py big  --out bench/out/big.pt  --mb 500
    /usr/bin/python3 bench/make_big_archive.py many --out bench/out/many.pt --tensors 2000

big:  a scripted nn.ModuleList of LAYERS square Linear layers (float32) whose
      parameters add up to about MB megabytes (10^6 bytes): few, large records.
many: a scripted module with TENSORS tiny registered buffers: many small
      records, which is what makes `unzip -l` (and any ZIP directory reader)
      slower.

The archive is written into a scratch folder next to --out and renamed into
place only when torch.jit.save finished, so an interrupted run never leaves a
half-written file that a later run would reuse.

TorchScript scripting calls inspect.getsource, so the module classes live
here, in a real file.
"""

import argparse
import math
import os
import sys
import tempfile

import torch
from torch import Tensor, nn


class BigStack(nn.Module):
    """LAYERS x Linear(width, width); forward runs x through all of them."""

    def __init__(self, layers: int, width: int):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class ManyBuffers(nn.Module):
    """COUNT tiny float32 buffers b0..b{COUNT-1}; forward uses only b0."""

    def __init__(self, count: int):
        super().__init__()
        for i in range(count):
            self.register_buffer(f"b{i}", torch.full((4,), float(i)))

    def forward(self, x: Tensor) -> Tensor:
        return x + self.b0


def square_width(total_bytes: int, layers: int) -> int:
    # Each Linear(w, w) holds w*w + w float32 values.
    per_layer = total_bytes / layers / 4
    return max(1, int(math.floor((-1 + math.sqrt(1 + 4 * per_layer)) / 2)))


def save(module: nn.Module, out: str) -> None:
    module.eval()
    scripted = torch.jit.script(module)
    out = os.path.abspath(out)
    out_dir = os.path.dirname(out)
    os.makedirs(out_dir, exist_ok=True)
    # Same basename in a scratch folder: torch names the archive's top folder
    # after the file, so "big.pt" must stay "big.pt" until the rename.
    with tempfile.TemporaryDirectory(prefix=".make_big_archive.", dir=out_dir) as tmp_dir:
        tmp = os.path.join(tmp_dir, os.path.basename(out))
        torch.jit.save(scripted, tmp)
        os.replace(tmp, out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=["big", "many"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--mb", type=float, default=500.0, help="big: total parameter bytes, in 10^6 (default 500)")
    ap.add_argument("--layers", type=int, default=128, help="big: number of Linear layers (default 128)")
    ap.add_argument("--tensors", type=int, default=2000, help="many: number of buffers (default 2000)")
    args = ap.parse_args()

    torch.manual_seed(0)
    if args.kind == "big":
        width = square_width(int(args.mb * 1e6), args.layers)
        module = BigStack(args.layers, width)
        n_params = sum(p.numel() for p in module.parameters())
        print(f"big: {args.layers} x Linear({width}, {width}), {n_params:,} float32 parameters "
              f"= {n_params * 4 / 1e6:.1f} MB", file=sys.stderr)
    else:
        module = ManyBuffers(args.tensors)
        print(f"many: {args.tensors} buffers of 4 float32", file=sys.stderr)
    save(module, args.out)
    print(f"wrote {args.out} ({os.path.getsize(args.out):,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
