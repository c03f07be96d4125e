#!/usr/bin/python3
"""Pictures in and out of `tsarchive run` against PyTorch's own preprocessing
(torchvision transforms on PIL images) and models run by torch.jit.

    check_images.py TSARCHIVE TESTDATA

Run by CTest with Debian's python3 (exit 77, skipped, without torch,
torchvision or PIL). The pictures and models are testdata/images/, made by
scripts/make_image_testdata.py.

Tolerances, stated and checked:
  - PNG, BMP and JPEG, with or without resize and crop: exact. The resize is
    Pillow's bilinear resampling with antialiasing, reimplemented bit for bit;
    JPEG is decoded by libjpeg-turbo with PIL's settings; ToTensor and
    Normalize are float32 as torchvision's.
  - Pictures written from float outputs: x * 255 rounded (ours: half away
    from zero in double; torch.round: half to even in float32): within 1.
"""

import json
import os
import subprocess
import sys
import tempfile

import harness
from harness import check, finish

try:
    import numpy as np
    import torch
    import torchvision.transforms as T
    from PIL import Image
except ImportError as e:
    print("skipped: needs torch, torchvision and PIL:", e)
    sys.exit(77)

TSARCHIVE, TESTDATA = sys.argv[1], sys.argv[2]
IMAGES = os.path.join(TESTDATA, "images")
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
TMP = tempfile.mkdtemp(prefix="tsarchive-images-")


def path(name):
    return os.path.join(IMAGES, name)


def tool(*args, want=0):
    return harness.tsarchive(TSARCHIVE, *args, want=want)


def ours(spec, model="identity.pt"):
    """The tensor run hands the model for --input @spec (identity.pt returns it)."""
    out = os.path.join(TMP, "out.npy")
    if os.path.exists(out):
        os.remove(out)
    p = tool("run", path(model), "--input", "@" + path(spec), "--save-outputs", out)
    return np.load(out) if p.returncode == 0 else None


def torchvision_tensor(name, transforms, normalize=IMAGENET):
    image = Image.open(path(name)).convert("RGB")
    steps = transforms + [T.ToTensor()] + ([T.Normalize(*normalize)] if normalize else [])
    return T.Compose(steps)(image).unsqueeze(0).numpy()


def compare(spec, reference, what):
    got = ours(spec)
    if got is None:
        return
    check(got.shape == reference.shape, f"{what}: shape {got.shape} vs torchvision {reference.shape}")
    if got.shape != reference.shape:
        return
    check(got.dtype == reference.dtype, f"{what}: dtype {got.dtype} vs {reference.dtype}")
    diff = np.abs(got.astype(np.float64) - reference.astype(np.float64))
    check(diff.max() == 0, f"{what}: not exact, max difference {diff.max()}")


# --- inputs against torchvision ------------------------------------------------
LOSSLESS = [
    ("gradient.png", "", []),
    ("gradient.png", ":resize=32", [T.Resize(32)]),
    ("gradient.png", ":resize=100x30", [T.Resize((100, 30))]),
    ("portrait.png", ":resize=20:crop=16", [T.Resize(20), T.CenterCrop(16)]),
    ("portrait.png", ":resize=224:crop=224", [T.Resize(224), T.CenterCrop(224)]),
    ("odd.bmp", ":resize=17:crop=15x9", [T.Resize(17), T.CenterCrop((15, 9))]),
    ("odd.bmp", ":crop=21x12", [T.CenterCrop((21, 12))]),  # odd margins: Python's round, halves to even
    ("topdown.bmp", "", []),  # rows stored top-down: a negative height in the header
    ("gray.png", ":resize=16", [T.Resize(16)]),
    ("rgba.png", "", []),
    ("palette.png", ":resize=7x9", [T.Resize((7, 9))]),
]
for name, options, transforms in LOSSLESS:
    spec = name + options + ":normalize=imagenet"
    compare(spec, torchvision_tensor(name, transforms), spec)
    spec = name + options  # no normalization: ToTensor's [0, 1]
    compare(spec, torchvision_tensor(name, transforms, normalize=None), spec)

for name, options, transforms in [("photo.jpg", "", []), ("photo.jpg", ":resize=256:crop=224", [T.Resize(256), T.CenterCrop(224)]),
                                  ("apple.jpg", ":resize=64", [T.Resize(64)])]:
    spec = name + options + ":normalize=imagenet"
    compare(spec, torchvision_tensor(name, transforms), spec)

# Explicit mean/std, layouts, channel order, uint8.
reference = torchvision_tensor("gradient.png", [T.Resize(24)], normalize=((0.5, 0.4, 0.3), (0.2, 0.25, 0.3)))
compare("gradient.png:resize=24:mean=0.5,0.4,0.3:std=0.2,0.25,0.3", reference, "mean/std")
compare("gradient.png:resize=24:mean=0.5,0.4,0.3:std=0.2,0.25,0.3:layout=nhwc", reference.transpose(0, 2, 3, 1),
        "layout=nhwc")
compare("gradient.png:resize=24:mean=0.5,0.4,0.3:std=0.2,0.25,0.3:layout=chw", reference[0], "layout=chw")
compare("gradient.png:resize=24:mean=0.5,0.4,0.3:std=0.2,0.25,0.3:channels=bgr", reference[:, ::-1],
        "channels=bgr (mean and std stay R,G,B)")
pixels = np.asarray(Image.open(path("gradient.png")).convert("RGB"))
compare("gradient.png:dtype=uint8:layout=hwc", pixels, "dtype=uint8 layout=hwc")
compare("gradient.png:dtype=uint8", pixels.transpose(2, 0, 1)[None], "dtype=uint8")

# A batch: a folder (by name) and files joined by ','.
batch = np.concatenate([torchvision_tensor(os.path.join("batch", f), [T.Resize((32, 40))])
                        for f in sorted(os.listdir(path("batch")))])
compare("batch:resize=32x40:normalize=imagenet", batch, "a folder")
compare(",".join(path(os.path.join("batch", f)) for f in ["img2.png", "img0.png"]) + ":resize=32x40:normalize=imagenet",
        batch[[2, 0]], "files joined by ','")

# --- bad specs and hostile pictures: one line, the documented exit code -------
for spec, want in [("gradient.png:resize=0", 2), ("gradient.png:resise=32", 2), ("gradient.png:crop=49x10", 2),
                   ("gradient.png:dtype=uint8:normalize=imagenet", 2), ("gradient.png:layout=ncwh", 2),
                   ("gradient.png:mean=1,2", 2), ("gradient.png:std=0", 2), ("batch", 2),
                   ("batch:layout=chw:resize=8", 2), ("missing.png", 4), ("../run/mlp_in.npy:resize=3", 2)]:
    tool("run", path("identity.pt"), "--input", "@" + path(spec), want=want)
for name in sorted(os.listdir(path("hostile"))):
    p = tool("run", path("identity.pt"), "--input", "@" + path(os.path.join("hostile", name)), want=3)
    check(name in p.stderr, f"hostile/{name}: the error names the file: {p.stderr!r}")

# --- pictures out ---------------------------------------------------------------
# Normalized in, the same normalization undone out: the picture comes back.
out_png = os.path.join(TMP, "back.png")
tool("run", path("identity.pt"), "--input", "@" + path("gradient.png") + ":normalize=imagenet", "--save-outputs",
     out_png + ":normalize=imagenet")
back = np.asarray(Image.open(out_png))
check(back.shape == pixels.shape and np.array_equal(back, pixels), "normalize=imagenet in and out: the same pixels")
tool("run", path("identity.pt"), "--input", "@" + path("gradient.png") + ":layout=nhwc:channels=bgr", "--save-outputs",
     out_png + ":layout=nhwc:channels=bgr")
check(np.array_equal(np.asarray(Image.open(out_png)), pixels), "layout=nhwc channels=bgr in and out: the same pixels")
tool("run", path("identity.pt"), "--input", "@" + path("gray.png") + ":dtype=uint8:layout=chw", "--save-outputs", out_png)
check(np.array_equal(np.asarray(Image.open(out_png).convert("RGB")), np.asarray(Image.open(path("gray.png")).convert("RGB"))),
      "a uint8 [3, H, W] output is written as is")

# Image to image, end to end: sepia.pt on a picture, against torch.jit in Python.
sepia_png = os.path.join(TMP, "sepia.png")
tool("run", path("sepia.pt"), "--input", "@" + path("odd.bmp"), "--save-outputs", sepia_png)
model = torch.jit.load(path("sepia.pt"))
x = T.ToTensor()(Image.open(path("odd.bmp")).convert("RGB")).unsqueeze(0)
expected = (model(x)[0] * 255).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
written = np.asarray(Image.open(sepia_png))
check(written.shape == expected.shape, f"sepia: {written.shape} vs {expected.shape}")
if written.shape == expected.shape:
    d = np.abs(written.astype(int) - expected.astype(int))
    check(d.max() <= 1, f"sepia.png differs from torch.jit's output by {d.max()} levels")

# Not a picture: one line, exit 3, nothing written.
bad_png = os.path.join(TMP, "scores.png")
tool("run", path("colors.pt"), "--input", "@" + path("apple.jpg"), "--save-outputs", bad_png, want=3)
check(not os.path.exists(bad_png), "a refused output picture leaves no file")
tool("run", path("identity.pt"), "--input", "@" + path("gradient.png"), "--save-outputs", out_png + ":nope=1", want=2)

# --- a classifier's top k -------------------------------------------------------
spec = "@" + path("apple.jpg") + ":resize=256:crop=224:normalize=imagenet"
p = tool("run", path("colors.pt"), "--input", spec, "--top", "5", "--json")
top = json.loads(p.stdout).get("top", {}) if p.returncode == 0 else {}
labels = json.loads(subprocess.run([TSARCHIVE, "extra", "get", path("colors.pt"), "labels.json"], capture_output=True,
                                   text=True).stdout)["classes"]
model = torch.jit.load(path("colors.pt"))
scores = model(torch.from_numpy(torchvision_tensor("apple.jpg", [T.Resize(256), T.CenterCrop(224)])))[0]
probs = torch.softmax(scores.double(), 0)
want = torch.topk(probs, 5).indices.tolist()
got = [c["index"] for c in top.get("classes", [])]
check(got == want, f"top 5 {got} vs torch.topk {want}")
check(top.get("labels") == "extra/labels.json", f"labels from the archive's extra/labels.json: {top.get('labels')}")
for c in top.get("classes", []):
    check(c["label"] == labels[c["index"]], f"label of class {c['index']}: {c['label']}")
    check(abs(c["probability"] - float(probs[c["index"]])) < 1e-5, f"probability of {c['label']}: {c['probability']}")
check(got[:1] == [labels.index("red")], "the apple is red")
p = tool("run", path("colors.pt"), "--input", spec, "--top", "3", "--labels", path("labels.txt"))
check("labels: " + path("labels.txt") in p.stdout and " red " in p.stdout, f"--labels FILE, text output:\n{p.stdout}")
tool("run", path("colors.pt"), "--input", spec, "--top", "3", "--labels", "extra:missing.json", want=2)
tool("run", path("colors.pt"), "--input", spec, "--labels", path("labels.txt"), want=2)
tool("run", path("sepia.pt"), "--input", spec, "--top", "3", want=3)

# --- the same specs in trace -----------------------------------------------------
traced = os.path.join(TMP, "sepia_traced.pt")
tool("trace", path("sepia.pt"), "--input", "@" + path("photo.jpg") + ":resize=32", "-o", traced)
check(os.path.exists(traced), "trace takes an image input")

finish("pictures: inputs equal torchvision's (PNG, BMP, JPEG), outputs and top-k match torch.jit")
