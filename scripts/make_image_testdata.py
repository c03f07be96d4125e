#!/usr/bin/python3
"""Generate the test data for pictures in and out of `tsarchive run`
(testdata/images/): small pictures made with PIL, hostile picture files made
byte by byte, and three traced models.

Regenerate from the repository root with Debian's interpreter (python3-torch,
python3-pil):

    /usr/bin/python3 scripts/make_image_testdata.py           # writes testdata/images/
    /usr/bin/python3 scripts/make_image_testdata.py OUTDIR    # writes elsewhere

Pictures are drawn from fixed formulas and a seeded random generator, so every
file is byte-identical between runs (PIL's encoders are deterministic). The
models are traced (torch.jit.trace), so no Python source path is embedded.
"""

import json
import os
import random
import struct
import sys
import zlib

import torch
from PIL import Image

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO_ROOT, "testdata", "images")

# What models/colors.pt tells apart, by the mean colour of the picture.
COLORS = [
    ("red", (0.85, 0.1, 0.1)),
    ("green", (0.1, 0.7, 0.2)),
    ("blue", (0.1, 0.2, 0.85)),
    ("yellow", (0.9, 0.85, 0.1)),
    ("orange", (0.95, 0.55, 0.1)),
    ("purple", (0.5, 0.15, 0.6)),
    ("white", (0.95, 0.95, 0.95)),
    ("black", (0.05, 0.05, 0.05)),
    ("gray", (0.5, 0.5, 0.5)),
    ("brown", (0.45, 0.3, 0.15)),
]
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def pattern(width, height, seed):
    """Gradients, a disc and noise: something a resize visibly changes."""
    rng = random.Random(seed)
    img = Image.new("RGB", (width, height))
    px = img.load()
    for y in range(height):
        for x in range(width):
            r = (x * 255) // max(1, width - 1)
            g = (y * 255) // max(1, height - 1)
            b = 255 if (x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(width, height) / 3) ** 2 else 40
            n = rng.randrange(-30, 31)
            px[x, y] = tuple(max(0, min(255, v + n)) for v in (r, g, b))
    return img


def apple(width, height):
    """A red disc on a white background, lit from the top left: a 'red' picture."""
    img = Image.new("RGB", (width, height), (235, 235, 230))
    px = img.load()
    cx, cy, radius = width / 2, height / 2, min(width, height) * 0.45
    for y in range(height):
        for x in range(width):
            d = ((x - cx) ** 2 + (y - cy) ** 2) ** 0.5
            if d < radius:
                light = 1.0 - 0.4 * ((x - cx * 0.7) ** 2 + (y - cy * 0.7) ** 2) ** 0.5 / radius
                px[x, y] = (int(200 * light + 40), int(25 * light), int(30 * light))
    return img


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_file(width, height, raw, color_type=2):
    ihdr = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw, 9)) +
            png_chunk(b"IEND", b""))


def bmp_header(width, height, bits=24, data=b""):
    header = struct.pack("<2sIHHI", b"BM", 54 + len(data), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, bits, 0, len(data), 2835, 2835, 0, 0)
    return header + info + data


def hostile(folder):
    """Picture files that lie; each must be refused with one line, exit 3."""
    files = {}
    # A PNG header claiming 100000 x 100000 pixels (30 GB of RGB) in 70 bytes.
    files["huge_dims.png"] = png_file(100000, 100000, b"\0" * 16)
    # Within stb's own 16384-pixel side limit but over ours (64 Mpixel).
    files["over_pixel_limit.png"] = png_file(16000, 16000, b"\0" * 16)
    # 16 x 16 pixels whose IDAT inflates to 64 MiB: a decompression bomb.
    files["inflate_bomb.png"] = png_file(16, 16, b"\0" * (64 << 20))
    # A BMP header claiming 2^31 - 1 pixels a side.
    files["huge_dims.bmp"] = bmp_header(0x7FFFFFFF, 0x7FFFFFFF)
    # A BMP of 0 x 0 pixels.
    files["zero_size.bmp"] = bmp_header(0, 0)
    # The first half of a JPEG.
    with open(os.path.join(OUT, "photo.jpg"), "rb") as f:
        jpeg = f.read()
    files["truncated.jpg"] = jpeg[: len(jpeg) // 2]
    # A JPEG header only: SOI, then noise.
    files["soi_noise.jpg"] = b"\xff\xd8\xff" + bytes(random.Random(7).randrange(256) for _ in range(512))
    # A PNG with its IHDR CRC broken and an 8-byte IHDR.
    files["short_ihdr.png"] = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 8) + b"IHDR" + b"\0" * 12
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return sorted(files)


class Identity(torch.nn.Module):
    def forward(self, x):
        return x.clone()


class Colors(torch.nn.Module):
    """Classifies a picture (ImageNet-normalized) by its mean colour."""

    def __init__(self):
        super().__init__()
        self.register_buffer("prototypes", torch.tensor([rgb for _, rgb in COLORS]))
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1))

    def forward(self, x):
        rgb = (x * self.std + self.mean).mean(dim=(2, 3))
        distance = ((rgb[:, None, :] - self.prototypes[None, :, :]) ** 2).sum(-1)
        return -20.0 * distance


class Sepia(torch.nn.Module):
    """Image to image: a sepia tone ([0, 1] RGB in and out)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.tensor([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168],
                                                     [0.272, 0.534, 0.131]]).view(3, 3, 1, 1))

    def forward(self, x):
        return torch.nn.functional.conv2d(x, self.weight).clamp(0.0, 1.0)


def top_down_bmp(img):
    """PIL writes BMP rows bottom-up (a positive height); many tools write them
    top-down, which the header says with a negative height. Same pixels."""
    import io
    buf = io.BytesIO()
    img.save(buf, format="BMP")
    b = bytearray(buf.getvalue())
    offset = struct.unpack_from("<I", b, 10)[0]
    width, height = struct.unpack_from("<ii", b, 18)
    row = (width * 24 + 31) // 32 * 4
    rows = [bytes(b[offset + i * row:offset + (i + 1) * row]) for i in range(height)]
    struct.pack_into("<i", b, 22, -height)
    b[offset:offset + row * height] = b"".join(reversed(rows))
    return bytes(b)


def save_traced(module, example, path, extra=None):
    traced = torch.jit.trace(module.eval(), example)
    torch.jit.save(traced, path, _extra_files=extra or {})


def main():
    os.makedirs(os.path.join(OUT, "hostile"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "batch"), exist_ok=True)
    made = []

    def save(img, name, **kwargs):
        img.save(os.path.join(OUT, name), **kwargs)
        made.append(name)

    def save_top_down_bmp(img, name):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(top_down_bmp(img))
        assert list(Image.open(os.path.join(OUT, name)).convert("RGB").getdata()) == list(img.getdata())
        made.append(name)

    save(pattern(64, 48, 1), "gradient.png")
    save(pattern(48, 64, 2), "portrait.png")
    save(pattern(80, 60, 3), "photo.jpg", quality=90)
    save(pattern(37, 23, 4), "odd.bmp")
    save_top_down_bmp(pattern(29, 13, 8), "topdown.bmp")
    save(pattern(40, 30, 5).convert("L"), "gray.png")
    rgba = pattern(40, 30, 6).convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize((40, 30)))
    save(rgba, "rgba.png")
    save(pattern(40, 30, 7).convert("P", palette=Image.ADAPTIVE, colors=16), "palette.png")
    save(apple(96, 80), "apple.jpg", quality=92)
    for i in range(3):
        pattern(50 + 10 * i, 40 + 5 * i, 10 + i).save(os.path.join(OUT, "batch", "img%d.png" % i))
    made.append("batch/")
    made += ["hostile/" + n for n in hostile(os.path.join(OUT, "hostile"))]

    save_traced(Identity(), torch.zeros(1, 3, 8, 8), os.path.join(OUT, "identity.pt"))
    labels = json.dumps({"classes": [name for name, _ in COLORS]}).encode()
    save_traced(Colors(), torch.zeros(1, 3, 8, 8), os.path.join(OUT, "colors.pt"), {"labels.json": labels})
    save_traced(Sepia(), torch.zeros(1, 3, 8, 8), os.path.join(OUT, "sepia.pt"))
    with open(os.path.join(OUT, "labels.txt"), "w") as f:
        f.write("".join(name + "\n" for name, _ in COLORS))
    made += ["identity.pt", "colors.pt", "sepia.pt", "labels.txt"]
    for name in made:
        print("wrote", os.path.join(OUT, name))


if __name__ == "__main__":
    main()
