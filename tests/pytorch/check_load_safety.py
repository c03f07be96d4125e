#!/usr/bin/env python3
"""tsarchive's prediction of torch.load(weights_only=True) against the real one.

    check_load_safety.py TSARCHIVE TESTDATA

Only the benign files of TESTDATA/loadsafety are loaded (with weights_only=True);
the hostile ones are never given to any loader. For each, tsarchive inspect
--json --torch-version <this torch> says "accepts" or "refuses" for
torch.load(weights_only=True); torch.load must agree. Exit 77 without torch.
"""
import json
import os
import subprocess
import sys
import warnings

try:
    import torch
except ImportError:
    print("SKIP: no torch")
    sys.exit(77)

tsarchive, testdata = sys.argv[1:3]
version = "%d.%d" % tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
benign = os.path.join(testdata, "loadsafety", "benign")
failures = 0
checked = 0
for folder, _, names in sorted(os.walk(benign)):
    for name in sorted(names):
        path = os.path.join(folder, name)
        out = subprocess.run([tsarchive, "inspect", "--json", "--torch-version", version, path],
                             capture_output=True, text=True)
        doc = json.loads(out.stdout)
        predicted = [v["outcome"] for v in doc["load_safety"]["loaders"]
                     if v["loader"] == "torch.load(weights_only=True)"][0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                torch.load(path, weights_only=True)
                actual = "accepts"
            except Exception:
                actual = "refuses"
        # Before 2.6 torch.load hands TorchScript to torch.jit.load: tsarchive says "runs code".
        if predicted == "runs code":
            predicted = "accepts"
        checked += 1
        if predicted != actual:
            failures += 1
            print("MISMATCH %s: tsarchive says %s, torch %s says %s" % (path, predicted, version, actual))
print("%d benign files, %d mismatches (torch %s)" % (checked, failures, version))
sys.exit(1 if failures else 0)
