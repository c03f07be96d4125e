#!/usr/bin/python3
"""Generate the input files of `tsarchive run` tests: testdata/inputs/.

.npy files (numpy.save), torch.save files, files written by libtorch's
torch::pickle_save (scripts/pickle_save_inputs.cc, compiled here against
Debian's libtorch), hostile variants made by editing bytes, and
expected.json: for every readable file, the values PyTorch/NumPy read back,
as {dtype, shape, values (flattened, C order)}, so the C++ tests compare
decoded elements exactly.

Regenerate from the repository root with Debian's interpreter (the one with
numpy and torch; PyTorch 1.13, numpy 1.24):

    /usr/bin/python3 scripts/make_input_files.py            # writes testdata/inputs/
    /usr/bin/python3 scripts/make_input_files.py OUTDIR

Values are fixed (arange-based), never random, so the files come out the
same on every run with the same numpy and torch.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def flat(value):
    """Elements of a tensor or array in C order, as JSON numbers ([re, im] for complex)."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        a = (value.float() if value.dtype == torch.bfloat16 else value).numpy()  # exact: bf16 is a float32 prefix
    else:
        a = np.asarray(value)
    out = []
    for x in a.reshape(-1).tolist():
        out.append([x.real, x.imag] if isinstance(x, complex) else x)
    return out


def describe(value):
    """What a reader must decode: tensors as dtype/shape/values, containers recursively."""
    if isinstance(value, torch.Tensor):
        return {"tensor": str(value.dtype).replace("torch.", ""), "shape": list(value.shape),
                "stride": list(value.stride()), "offset": value.storage_offset(), "values": flat(value)}
    if isinstance(value, np.ndarray):  # dtype.name ignores byte order: '>i4' is int32
        return {"tensor": value.dtype.name, "shape": list(value.shape), "values": flat(value)}
    if isinstance(value, (list, tuple)):
        return {"list": [describe(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[k, describe(v)] for k, v in value.items()]}
    return {"scalar": value}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "testdata", "inputs")
    os.makedirs(out, exist_ok=True)
    expected = {}

    def npy(name, array):
        path = os.path.join(out, name)
        np.save(path, array)
        expected[name] = describe(np.load(path))

    def pt(name, value):
        path = os.path.join(out, name)
        torch.save(value, path)
        expected[name] = describe(torch.load(path))

    # .npy: byte orders, memory orders and dtypes.
    npy("f4_c.npy", np.arange(6, dtype="<f4").reshape(2, 3) / 4)
    npy("f8_fortran.npy", np.asfortranarray(np.arange(12, dtype="<f8").reshape(3, 4) - 5.5))
    npy("i4_big.npy", np.array([[1, -2, 3], [70000, -80000, 2**31 - 1]], dtype=">i4"))
    npy("c8_big.npy", np.array([1 + 2j, -3.5 - 0.25j], dtype=">c8"))
    npy("bool.npy", np.array([True, False, True, True]))
    npy("i8_scalar.npy", np.array(-1234567890123, dtype="<i8"))
    npy("c8.npy", np.array([[1 + 2j, 3 - 4j], [0.5j, -1]], dtype="<c8"))
    npy("f2.npy", np.array([0.5, -2, 65504, 1e-4], dtype="<f2"))
    npy("u1_empty.npy", np.zeros((0, 3), dtype="u1"))
    np.save(os.path.join(out, "u2.npy"), np.arange(3, dtype="<u2"))
    np.save(os.path.join(out, "object.npy"), np.array([{"a": 1}, None], dtype=object), allow_pickle=True)

    # Hostile .npy, made by editing f4_c.npy's bytes.
    with open(os.path.join(out, "f4_c.npy"), "rb") as f:
        good = f.read()
    with open(os.path.join(out, "truncated.npy"), "wb") as f:
        f.write(good[:-5])  # 5 bytes of data missing
    lying = good.replace(b"'shape': (2, 3)", b"'shape': (3, 3)")
    assert lying != good
    with open(os.path.join(out, "lying_header.npy"), "wb") as f:
        f.write(lying)
    with open(os.path.join(out, "header_past_eof.npy"), "wb") as f:
        f.write(good[:8] + b"\xff\x7f" + good[10:40])  # header length 32767, 30 bytes follow

    # torch.save: a tensor, containers, views.
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t2 = torch.tensor([7, 8, 9], dtype=torch.int64)
    pt("tensor.pt", t)
    pt("tuple.pt", (t, t2))
    pt("dict.pt", {"a": t, "b": t2})
    pt("transposed.pt", torch.arange(6, dtype=torch.float64).reshape(2, 3).t())
    base = torch.arange(10, dtype=torch.int32)
    pt("shared.pt", [base[2:5], base[5:], base.view(2, 5)])
    pt("mixed.pt", {"x": torch.tensor([True, False]), "n": 3, "f": 0.5, "s": "hi", "none": None,
                    "nested": [torch.tensor(1.5, dtype=torch.float16), (1, 2)]})
    pt("parameter.pt", torch.nn.Parameter(torch.ones(2, dtype=torch.bfloat16)))
    q = torch.quantize_per_tensor(torch.tensor([0.5, 1.0]), 0.1, 0, torch.qint8)
    torch.save(q, os.path.join(out, "quantized.pt"))

    # A view larger than its storage: torch.save the view, then shrink the
    # storage's declared size in data.pkl and the record itself.
    make_short_storage(os.path.join(out, "short_storage.pt"))

    # torch::pickle_save (libtorch C++): build_tensorlist, build_intlist, restore_type_tag.
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "pickle_save_inputs")
        subprocess.check_call(["c++", "-std=c++17", "-O0", "-I/usr/include/torch/csrc/api/include",
                               os.path.join(ROOT, "scripts", "pickle_save_inputs.cc"), "-o", exe,
                               "-ltorch", "-ltorch_cpu", "-lc10"])
        subprocess.check_call([exe, out])
    for name in ("pickle_save_tensors.pt", "pickle_save_tuple.pt"):
        expected[name] = describe(torch.load(os.path.join(out, name)))

    expected["_generator"] = {"torch": torch.__version__, "numpy": np.__version__}
    with open(os.path.join(out, "expected.json"), "w") as f:
        f.write("{\n" + ",\n".join(" %s: %s" % (json.dumps(k), json.dumps(expected[k])) for k in sorted(expected))
                + "\n}\n")
    for name in sorted(os.listdir(out)):
        size = os.path.getsize(os.path.join(out, name))
        assert size < 10_000 or name == "expected.json", (name, size)


def make_short_storage(path):
    """torch.save of a 4-element view, then the storage declared and stored as 2 elements."""
    import io
    import zipfile
    buf = io.BytesIO()
    torch.save(torch.arange(4, dtype=torch.int64), buf)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith("data.pkl"):
                # numel 4 as BININT1 'K\x04' inside the storage tuple -> 2
                marker = b"X\x03\x00\x00\x00cpuq"
                at = data.index(marker)
                k = data.index(b"K\x04", at)
                data = data[:k] + b"K\x02" + data[k + 2:]
            elif info.filename.endswith("data/0"):
                data = data[:16]
            dst.writestr(info.filename, data)


if __name__ == "__main__":
    main()
