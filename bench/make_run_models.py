#!/usr/bin/python3
"""bench/make_run_models.py OUT.pt: the resnet18 archive bench/run.sh times.

torchvision.models.resnet18(weights=None) (random weights after
torch.manual_seed(0): no download), eval mode, torch.jit.script, saved to
OUT.pt (~45 MB). Needs Debian's python3-torch and python3-torchvision
(apt-get install python3-torchvision). Exit 2 when torchvision is missing.
"""

import sys

import torch

try:
    import torchvision
except ImportError:
    print("bench/make_run_models.py: needs torchvision (apt-get install python3-torchvision)",
          file=sys.stderr)
    sys.exit(2)


def main():
    if len(sys.argv) != 2:
        print("usage: make_run_models.py OUT.pt", file=sys.stderr)
        sys.exit(2)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    torch.jit.script(model).save(sys.argv[1])
    print("wrote %s (torchvision %s, torch %s)" % (sys.argv[1], torchvision.__version__, torch.__version__))


if __name__ == "__main__":
    main()
