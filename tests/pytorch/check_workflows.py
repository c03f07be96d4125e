#!/usr/bin/python3
"""Real workflows on archives real PyTorch writes: what a user keeps
in an archive survives every command that writes one, and what a command
reports about an archive is true.

Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):

    /usr/bin/python3 tests/pytorch/check_workflows.py TSARCHIVE

The archives are made here, at test time, with Python's torch.jit:
- convert (--freeze, --optimize-for-inference, --mobile, --lite) and trace carry every extra file over
  and keep the exported methods (Python loads them back and calls them); a
  trace, which records one method, refuses to drop the others (exit 1,
  nothing written) unless --allow-drop; the original's stamp is replaced with
  a note;
- a producer's own extra/producer_info.json (the PyTorch note's export-hook
  example) is never changed: verify says "not stamped by tsarchive; producer
  info present" (exit 0; --require-stamp: exit 1), stamp and convert put the
  stamp in extra/tsarchive/producer_info.json beside it.
"""

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import Dict, List, Optional, Tuple

from harness import check, finish

try:
    import torch
    from torch.jit.mobile import _load_for_lite_interpreter
except ImportError:
    print("torch is not installed for this python; skipping")
    sys.exit(77)

TSARCHIVE = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="tsarchive-workflows-")
atexit.register(shutil.rmtree, WORK, True)

LABELS = '["cat", "dog", "bird"]'
TRAIN = "lr: 0.1\nepochs: 3\n"
PRODUCER = json.dumps({"user": "trainer", "run": 17})


def tsarchive(*args):
    return subprocess.run([TSARCHIVE, *args], capture_output=True, text=True)


def load(p):
    """torch.load of our own files: 2.6+ loads plain tensors only by default."""
    if tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 6):
        return torch.load(p, weights_only=False)
    return torch.load(p)


def path(name):
    return os.path.join(WORK, name)


def extra_files(p):
    """name -> bytes of every extra/ record."""
    with zipfile.ZipFile(p) as z:
        out = {}
        for n in z.namelist():
            parts = n.split("/", 2)
            if len(parts) == 3 and parts[1] == "extra" and not n.endswith("/"):
                out[parts[2]] = z.read(n)
        return out


def one_error_line(r, what):
    lines = r.stderr.strip().splitlines()
    errors = [l for l in lines if l.startswith("tsarchive: error: ")]
    check(len(errors) == 1, f"{what}: one error line, got {lines}")


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(10, 3)

    def forward(self, x):
        return self.fc(x)

    @torch.jit.export
    def probs(self, x):
        return torch.softmax(self.forward(x), dim=-1)

    @torch.jit.export
    def topk(self, x, k: int = 2):
        return torch.topk(self.forward(x), k)[1]


torch.manual_seed(0)
clf = torch.jit.script(Classifier().eval())
torch.jit.save(clf, path("clf.pt"), _extra_files={"labels.json": LABELS, "config/train.yaml": TRAIN})
X = torch.randn(2, 10)


def user_files_kept(p, what):
    files = extra_files(p)
    check(files.get("labels.json") == LABELS.encode(), f"{what}: extra/labels.json kept ({sorted(files)})")
    check(files.get("config/train.yaml") == TRAIN.encode(), f"{what}: extra/config/train.yaml kept ({sorted(files)})")
    listing = tsarchive("extra", "list", p)
    check("labels.json" in listing.stdout and "config/train.yaml" in listing.stdout,
          f"{what}: extra list shows the user's files:\n{listing.stdout}")


def methods_kept(p, what, lite=False):
    if lite:
        m = _load_for_lite_interpreter(p)
        got = {name: m.run_method(name, X) for name in ("forward", "probs", "topk")}
    else:
        extra = {"labels.json": "", "config/train.yaml": ""}
        m = torch.jit.load(p, _extra_files=extra)
        check(extra["labels.json"] == LABELS.encode(), f"{what}: torch.jit.load reads extra/labels.json")
        got = {name: getattr(m, name)(X) for name in ("forward", "probs", "topk")}
    for name, value in got.items():
        want = getattr(clf, name)(X)
        check(value.shape == want.shape and torch.allclose(value.float(), want.float(), atol=1e-5),
              f"{what}: method {name} computes what the original's does")


# --- 1. convert and trace keep extra files and exported methods ---------------------

for flags, out, lite in ((["--freeze"], "frozen.pt", False), (["--mobile"], "mobile.pt", False),
                         (["--lite"], "lite.ptl", True), (["--mobile", "--lite"], "mobile.ptl", True),
                         ([], "plain.pt", False), (["--optimize-for-inference"], "inference.pt", False)):
    what = "convert " + " ".join(flags)
    r = tsarchive("convert", path("clf.pt"), "--input", "2x10", *flags, "-o", path(out))
    if "--mobile" in flags and r.returncode == 5 and "without XNNPACK" in r.stderr:
        # optimize_for_mobile needs XNNPACK, which the CPU wheels of libtorch
        # 2.x leave out: one line, exit 5, nothing written (check_jit.py).
        check(not os.path.exists(path(out)), f"{what} without XNNPACK wrote {out}")
        print(f"note: this libtorch has no XNNPACK: {what} is refused in one line")
        continue
    check(r.returncode == 0, f"{what}: exit {r.returncode}\n{r.stderr}")
    if r.returncode == 0:
        user_files_kept(path(out), what)
        methods_kept(path(out), what, lite)
        v = tsarchive("verify", path(out))
        check(v.returncode == 0 and "matches its stamp" in v.stdout, f"{what}: verify after it:\n{v.stdout}{v.stderr}")

# A trace records forward only: dropping probs and topk is an error unless --allow-drop.
r = tsarchive("trace", path("clf.pt"), "--input", "2x10", "-o", path("traced.pt"))
check(r.returncode == 1, f"trace of a module with exported methods: exit {r.returncode}, wanted 1\n{r.stderr}")
one_error_line(r, "trace dropping methods")
check("probs" in r.stderr and "topk" in r.stderr and "--allow-drop" in r.stderr,
      f"trace names the dropped methods and --allow-drop: {r.stderr}")
check(not os.path.exists(path("traced.pt")), "trace refusing to drop methods writes nothing")
check(not [n for n in os.listdir(WORK) if ".tsarchive-" in n], f"no staging folder left: {os.listdir(WORK)}")
r = tsarchive("trace", path("clf.pt"), "--input", "2x10", "--allow-drop", "-o", path("traced.pt"))
check(r.returncode == 0, f"trace --allow-drop: exit {r.returncode}\n{r.stderr}")
if r.returncode == 0:
    check("probs" in r.stderr and "topk" in r.stderr, f"trace --allow-drop names what it dropped: {r.stderr}")
    user_files_kept(path("traced.pt"), "trace --allow-drop")
    t = torch.jit.load(path("traced.pt"))
    check(torch.allclose(t(X), clf(X), atol=1e-5), "the trace computes forward")

# The original's stamp is replaced, and a note says so.
r = tsarchive("stamp", path("clf.pt"), "-o", path("clf_stamped.pt"), "--no-git", "--no-host")
check(r.returncode == 0, f"stamp clf.pt: {r.stderr}")
r = tsarchive("convert", path("clf_stamped.pt"), "--input", "2x10", "--freeze", "-o", path("frozen2.pt"))
check(r.returncode == 0, f"convert a stamped archive: exit {r.returncode}\n{r.stderr}")
check("stamp" in r.stderr and "not carried over" in r.stderr, f"convert says the old stamp is replaced: {r.stderr}")
if r.returncode == 0:
    user_files_kept(path("frozen2.pt"), "convert of a stamped archive")
    stamp = json.loads(extra_files(path("frozen2.pt"))["producer_info.json"])
    check(stamp.get("conversion", "").find("freeze") >= 0, f"the new stamp names the conversion: {stamp}")

# --- 2. a producer's own producer_info.json ------------------------------------------

torch.jit.save(clf, path("fleet.pt"), _extra_files={"producer_info.json": PRODUCER, "labels.json": LABELS})
r = tsarchive("verify", path("fleet.pt"))
check(r.returncode == 0, f"verify of a producer's producer_info.json: exit {r.returncode}\n{r.stdout}{r.stderr}")
check("not stamped by tsarchive; producer info present" in r.stdout, f"verify says whose file it is:\n{r.stdout}")
check("UNREADABLE" not in r.stdout, f"verify does not call it an unreadable stamp:\n{r.stdout}")
r = tsarchive("verify", path("fleet.pt"), "--require-stamp")
check(r.returncode == 1, f"verify --require-stamp of an unstamped archive: exit {r.returncode}")
one_error_line(r, "verify --require-stamp")
r = tsarchive("verify", path("clf_stamped.pt"), "--require-stamp")
check(r.returncode == 0, f"verify --require-stamp of a stamped archive: exit {r.returncode}\n{r.stderr}")
j = json.loads(tsarchive("verify", path("fleet.pt"), "--json").stdout)
check(j["stamp"] is None and j["producer_info"] == "extra/producer_info.json", f"verify --json: {j.get('producer_info')}")

for flags, out in (([], "fleet_stamped.pt"), (["--keep-bytes"], "fleet_kept.pt")):
    what = "stamp " + " ".join(flags)
    r = tsarchive("stamp", path("fleet.pt"), *flags, "-o", path(out), "--no-git", "--no-host")
    check(r.returncode == 0, f"{what}: exit {r.returncode}\n{r.stderr}")
    if r.returncode != 0:
        continue
    files = extra_files(path(out))
    check(files.get("producer_info.json") == PRODUCER.encode(), f"{what}: the producer's file is kept byte for byte")
    check(files.get("labels.json") == LABELS.encode(), f"{what}: extra/labels.json kept")
    ours = json.loads(files.get("tsarchive/producer_info.json", b"{}"))
    check(ours.get("_type", "").startswith("https://tsarchive.dev/"), f"{what}: the stamp beside it: {sorted(files)}")
    extra = {"producer_info.json": ""}
    torch.jit.load(path(out), _extra_files=extra)
    check(json.loads(extra["producer_info.json"]) == {"user": "trainer", "run": 17},
          f"{what}: Python reads the producer's file back")
    v = tsarchive("verify", path(out), "--require-stamp")
    check(v.returncode == 0 and "matches its stamp" in v.stdout, f"verify after {what}:\n{v.stdout}{v.stderr}")
    # Stamping again replaces our stamp, not theirs.
    r = tsarchive("stamp", path(out), *flags, "--no-git", "--no-host")
    check(r.returncode == 0, f"{what} again: {r.stderr}")
    files = extra_files(path(out))
    check(files.get("producer_info.json") == PRODUCER.encode(), f"{what} again: the producer's file is kept")
    again = json.loads(files.get("tsarchive/producer_info.json", b"{}"))
    check("previous" in again, f"{what} again: the stamp chains the previous one")
    # Changing their file is a change the stamp sees.
    r = tsarchive("extra", "set", path(out), "producer_info.json=" + json.dumps({"user": "mallory"}))
    v = tsarchive("verify", path(out))
    check(v.returncode == 1 and "producer_info.json" in v.stdout, f"verify sees the producer's file changed:\n{v.stdout}")

r = tsarchive("convert", path("fleet.pt"), "--input", "2x10", "--freeze", "-o", path("fleet_frozen.pt"))
check(r.returncode == 0, f"convert of a producer-stamped archive: exit {r.returncode}\n{r.stderr}")
if r.returncode == 0:
    files = extra_files(path("fleet_frozen.pt"))
    check(files.get("producer_info.json") == PRODUCER.encode(), "convert keeps the producer's file")
    check("tsarchive/producer_info.json" in files, f"convert stamps beside it: {sorted(files)}")
    v = tsarchive("verify", path("fleet_frozen.pt"), "--require-stamp")
    check(v.returncode == 0, f"verify after convert of a producer-stamped archive:\n{v.stdout}{v.stderr}")

# --- 3. edits refuse a damaged archive; diff calls damage damage ---------------------


def damage(src, dst, record_suffix):
    """A copy of src with one byte of a stored record flipped (its CRC-32 no longer matches)."""
    data = bytearray(open(src, "rb").read())
    with zipfile.ZipFile(src) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(record_suffix))
    start = info.header_offset
    name_len = int.from_bytes(data[start + 26:start + 28], "little")
    extra_len = int.from_bytes(data[start + 28:start + 30], "little")
    at = start + 30 + name_len + extra_len + info.file_size // 2
    data[at] ^= 0xFF
    open(dst, "wb").write(bytes(data))


damage(path("clf.pt"), path("damaged.pt"), "/data/0")
before = open(path("damaged.pt"), "rb").read()
for args in (["extra", "set", path("damaged.pt"), "note.txt=hi"], ["extra", "rm", path("damaged.pt"), "labels.json"],
             ["extra", "set", path("damaged.pt"), "note.txt=hi", "-o", path("damaged_edit.pt")]):
    r = tsarchive(*args)
    check(r.returncode == 3, f"{' '.join(args[:2])} on a damaged archive: exit {r.returncode}, wanted 3\n{r.stdout}{r.stderr}")
    one_error_line(r, f"{' '.join(args[:2])} on a damaged archive")
    check("data/0" in r.stderr and "damaged" in r.stderr, f"the error names the damaged record: {r.stderr}")
check(open(path("damaged.pt"), "rb").read() == before, "a refused edit leaves the damaged archive as it was")
check(not os.path.exists(path("damaged_edit.pt")), "a refused edit writes no -o file")
# --in-place checks only the records it rewrites (it stays constant-time): a
# new name rewrites only the central directory, so the damaged tensor is kept
# as it is, and verify still names it.
shutil.copy(path("damaged.pt"), path("damaged_in_place.pt"))
r = tsarchive("extra", "set", path("damaged_in_place.pt"), "note.txt=hi", "--in-place")
check(r.returncode == 0, f"--in-place beside a damaged record it does not rewrite: exit {r.returncode}\n{r.stderr}")
r = tsarchive("verify", path("damaged_in_place.pt"))
check(r.returncode == 3 and "data/0" in r.stderr + r.stdout, f"verify after --in-place: exit {r.returncode}\n{r.stderr}")
r = tsarchive("extra", "set", path("damaged.pt"), "note.txt=hi", "--allow-damaged", "-o", path("damaged_edit.pt"))
check(r.returncode == 0 and "data/0" in r.stderr, f"--allow-damaged edits and says what is damaged: {r.stderr}")
for a, b in ((path("clf.pt"), path("damaged.pt")), (path("damaged.pt"), path("clf.pt"))):
    r = tsarchive("diff", a, b)
    check(r.returncode == 3, f"diff with a damaged archive: exit {r.returncode}, wanted 3\n{r.stdout}{r.stderr}")
    one_error_line(r, "diff with a damaged archive")
    check("data/0" in r.stderr and "damaged" in r.stderr and path("damaged.pt") in r.stderr,
          f"diff names the damaged record and file: {r.stderr}")

# --- 4. interrupted writes leave nothing behind ------------------------------------


class Slow(torch.nn.Module):
    """Seconds a call (about 10 on libtorch 1.13): time to interrupt convert while its worker runs.
    Every run of it is interrupted, so a slower machine only waits longer for the kill."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(384, 384) / 20)

    def forward(self, x):
        for _ in range(1200):
            x = torch.tanh(x @ self.w)
        return x


torch.jit.save(torch.jit.script(Slow().eval()), path("slow.pt"))


def staging_folders():
    return [n for n in os.listdir(WORK) if ".tsarchive-" in n]


open(path("slow_stamp.pt"), "wb").write(open(path("slow.pt"), "rb").read())
slow_before = open(path("slow_stamp.pt"), "rb").read()
INTERRUPTED = [
    # (command, output it must not leave, signal, exit, to the process group as Ctrl-C does, delay)
    (["convert", path("slow.pt"), "--input", "384x384", "--freeze", "-o", path("slow_frozen.pt")],
     path("slow_frozen.pt"), signal.SIGTERM, 143, False, 0.3),
    (["convert", path("slow.pt"), "--input", "384x384", "--freeze", "-o", path("slow_frozen.pt")],
     path("slow_frozen.pt"), signal.SIGINT, 130, True, 0.3),
    (["trace", path("slow.pt"), "--input", "384x384", "-o", path("slow_traced.pt")],
     path("slow_traced.pt"), signal.SIGHUP, 129, False, 0.3),
    # The worker forks and loads libtorch (over half a second) before it re-saves.
    (["stamp", path("slow_stamp.pt"), "--no-git", "--no-host"], None, signal.SIGTERM, 143, False, 0.1),
]
for command, out, sig, want, group, delay in INTERRUPTED:
    for n in staging_folders():
        check(False, f"a staging folder before the interrupt test: {n}")
    p = subprocess.Popen([TSARCHIVE, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.time() + 60
    while not staging_folders() and p.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(delay)  # the worker is loading libtorch, or running the model
    check(p.poll() is None, f"{command[0]} of the slow model still runs when {sig.name} is sent")
    if group:
        os.killpg(p.pid, sig)  # Ctrl-C: the whole foreground process group
    else:
        os.kill(p.pid, sig)
    _, err = p.communicate(timeout=60)
    what = f"{command[0]} interrupted by {sig.name}"
    check(p.returncode == want, f"{what}: exit {p.returncode}, wanted {want}\n{err}")
    lines = err.strip().splitlines()
    check(len(lines) == 1 and lines[0].startswith("tsarchive: error: interrupted by " + sig.name),
          f"{what}: one line: {lines}")
    check(not staging_folders(), f"{what}: no staging folder: {staging_folders()}")
    if out is not None:
        check(not os.path.exists(out), f"{what}: nothing written")
check(open(path("slow_stamp.pt"), "rb").read() == slow_before, "an interrupted stamp leaves the archive as it was")

# --- 5-7. run: every value kind round-trips; scalar goldens; class objects ------------


@torch.jit.script
class Box(object):
    def __init__(self, score: float, label: str, data: torch.Tensor):
        self.score = score
        self.label = label
        self.data = data


class Kinds(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @torch.jit.export
    def integer(self, n: int) -> int:
        return n + 1

    @torch.jit.export
    def real(self, x: float) -> float:
        return x * 2.0

    @torch.jit.export
    def flag(self, b: bool) -> bool:
        return not b

    @torch.jit.export
    def text(self, s: str) -> str:
        return s + "!"

    @torch.jit.export
    def maybe(self, x: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        return x

    @torch.jit.export
    def floats(self, xs: List[float]) -> List[float]:
        return [v * 2.0 for v in xs]

    @torch.jit.export
    def strs(self, s: List[str]) -> List[str]:
        return s + ["z"]

    @torch.jit.export
    def tensors(self, t: List[torch.Tensor]) -> List[torch.Tensor]:
        return [v + 1 for v in t]

    @torch.jit.export
    def nested(self, x: List[List[int]]) -> List[List[int]]:
        return x + [[0]]

    @torch.jit.export
    def pair(self, p: Tuple[torch.Tensor, int]) -> Tuple[torch.Tensor, int]:
        return p[0] * p[1], p[1]

    @torch.jit.export
    def table(self, d: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        return {k + "2": v * 2 for k, v in d.items()}

    @torch.jit.export
    def maybe_list(self, x: Optional[List[int]]) -> int:
        return -1 if x is None else len(x)

    @torch.jit.export
    def two(self, x: torch.Tensor, k: int) -> torch.Tensor:
        return x * k

    @torch.jit.export
    def box(self, x: torch.Tensor) -> Box:
        return Box(float(x.sum()), "cat", x + 1)


torch.jit.save(torch.jit.script(Kinds()), path("kinds.pt"))
kinds = torch.jit.load(path("kinds.pt"))


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


CASES = [("forward", ["2x3"]), ("integer", ["json:3"]), ("real", ["json:1.5"]), ("flag", ["json:true"]),
         ("text", ['json:"ab"']), ("maybe", ["json:null"]), ("floats", ["json:[1.5,2.0,3]"]),
         ("strs", ['json:["a","b"]']), ("tensors", ['json:["2x3","2x3"]']), ("nested", ["json:[[1,2],[3]]"]),
         ("pair", ['json:["2x2",3]']), ("table", ['json:{"a":"2x2","b":"3"}']), ("maybe_list", ["json:null"]),
         ("two", ["2x3", "json:2"])]
for method, inputs in CASES:
    what = f"run -m {method}"
    saved_in, saved_out = path(f"{method}_in.pt"), path(f"{method}_out.pt")
    args = [a for i in inputs for a in ("--input", i)]
    r = tsarchive("run", path("kinds.pt"), "-m", method, *args, "--save-inputs", saved_in, "--save-outputs", saved_out)
    check(r.returncode == 0, f"{what} --save-inputs/--save-outputs: exit {r.returncode}\n{r.stderr}")
    if r.returncode != 0:
        continue
    py_args = load(saved_in)
    py_out = getattr(kinds, method)(*py_args)
    check(same(py_out, load(saved_out)), f"{what}: Python computes the saved outputs from the saved inputs")
    r = tsarchive("run", path("kinds.pt"), "-m", method, "--input", "@" + saved_in, "--expect", "@" + saved_out)
    check(r.returncode == 0, f"{what} --input @saved --expect @saved: exit {r.returncode}\n{r.stderr}")
    golden = path(f"{method}_golden.pt")
    torch.save(py_out, golden)  # what Python computes, as Python saves it
    r = tsarchive("run", path("kinds.pt"), "-m", method, *args, "--expect", "@" + golden)
    check(r.returncode == 0, f"{what} --expect @(torch.save of Python's result): exit {r.returncode}\n{r.stderr}")
    recorded = path(f"kinds_{method}.pt")
    open(recorded, "wb").write(open(path("kinds.pt"), "rb").read())
    r = tsarchive("run", recorded, "-m", method, *args, "--record")
    check(r.returncode == 0 and "extra/tsarchive/check.json" in r.stdout, f"{what} --record says what it wrote: {r.stdout[-300:]}{r.stderr}")
    r = tsarchive("run", recorded, "--check")
    check(r.returncode == 0, f"{what} --record, then --check: exit {r.returncode}\n{r.stderr}")

# Goldens that are plain values, as torch.save writes them.
for value, method, arg in ((9.0, "real", "json:4.5"), ("ab!", "text", 'json:"ab"'), (False, "flag", "json:true"),
                           (4, "integer", "json:3")):
    torch.save(value, path("plain_golden.pt"))
    r = tsarchive("run", path("kinds.pt"), "-m", method, "--input", arg, "--expect", "@" + path("plain_golden.pt"))
    check(r.returncode == 0, f"--expect @torch.save({value!r}): exit {r.returncode}\n{r.stderr}")
torch.save("other", path("plain_golden.pt"))
r = tsarchive("run", path("kinds.pt"), "-m", "text", "--input", 'json:"ab"', "--expect", "@" + path("plain_golden.pt"))
check(r.returncode == 1 and "--atol" not in r.stderr, f"a str that differs fails without a tolerance hint: {r.stderr}")
torch.save(torch.zeros(3, 2), path("shape_golden.pt"))
r = tsarchive("run", path("kinds.pt"), "--input", "2x3", "--expect", "@" + path("shape_golden.pt"))
check(r.returncode == 1 and "--atol" not in r.stderr, f"a shape mismatch gives no tolerance hint: {r.stderr}")

# A method returning a TorchScript class object: compared by its attributes.
r = tsarchive("run", path("kinds.pt"), "-m", "box", "--input", "2x2", "--save-outputs", path("box_out.pt"))
check(r.returncode == 0, f"run -m box --save-outputs: {r.stderr}")
r = tsarchive("run", path("kinds.pt"), "-m", "box", "--input", "2x2", "--expect", "@" + path("box_out.pt"))
check(r.returncode == 0 and r.stdout.count(" ok ") >= 3, f"run -m box --expect its own outputs: exit {r.returncode}\n{r.stdout[-400:]}{r.stderr}")
open(path("kinds_box.pt"), "wb").write(open(path("kinds.pt"), "rb").read())
r = tsarchive("run", path("kinds_box.pt"), "-m", "box", "--input", "2x2", "--record")
check(r.returncode == 0, f"run -m box --record: {r.stderr}")
r = tsarchive("run", path("kinds_box.pt"), "--check")
check(r.returncode == 0, f"run -m box --record, then --check: exit {r.returncode}\n{r.stderr}")

# run --record on a stamped archive says the stamp no longer covers it.
r = tsarchive("stamp", path("kinds_box.pt"), "--no-git", "--no-host")
r = tsarchive("run", path("kinds_box.pt"), "-m", "box", "--input", "2x2", "--record")
check(r.returncode == 0 and "no longer covers" in r.stdout + r.stderr, f"--record on a stamped archive says so: {r.stdout[-300:]}")
r = tsarchive("extra", "set", path("kinds_box.pt"), "owner=me")
check(r.returncode == 0 and "no longer covers" in r.stderr, f"extra set on a stamped archive says so: {r.stderr}")

# --- 8. per-channel quantized tensors: every storage record accounted for ------------

QPC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "testdata",
                   "quant_per_channel.pt")
r = tsarchive("inspect", QPC, "--json")
check(r.returncode == 0, f"inspect quant_per_channel.pt: {r.stderr}")
doc = json.loads(r.stdout)
with zipfile.ZipFile(QPC) as z:
    data_records = sorted(n.split("/", 1)[1] for n in z.namelist() if n.split("/")[1:2] == ["data"])
check(sorted(st["record"] for st in doc["storages"]) == data_records,
      f"inspect reaches every storage record: {len(doc['storages'])} of {len(data_records)}")
paths = {t["path"]: t for t in doc["tensors"]}
torch.backends.quantized.engine = "qnnpack"
qmodel = torch.jit.load(QPC)
weights = {"conv.10": torch.ops.quantized.conv2d_unpack(qmodel.conv._packed_params)[0],
           "fc._packed_params._packed_params.0":
               torch.ops.quantized.linear_unpack(qmodel.fc._packed_params._packed_params)[0]}
with zipfile.ZipFile(QPC) as z:
    for name, w in weights.items():
        for what, want in (("q_per_channel_scales", w.q_per_channel_scales()),
                           ("q_per_channel_zero_points", w.q_per_channel_zero_points())):
            t = paths.get(name + "." + what)
            check(t is not None, f"inspect lists {name}.{what}: {sorted(paths)}")
            if t is None:
                continue
            raw = bytearray(z.read("quant_per_channel/" + t["storage"]))
            got = torch.frombuffer(raw, dtype=want.dtype)[:t["numel"]]
            check(list(t["shape"]) == list(want.shape) and torch.equal(got, want),
                  f"{name}.{what}: the storage inspect names holds PyTorch's values")
# A storage record no tensor reaches is a note.
stray = path("stray.pt")
open(stray, "wb").write(open(QPC, "rb").read())
with zipfile.ZipFile(stray, "a") as z:
    z.writestr("quant_per_channel/data/99", b"\0" * 16)
r = tsarchive("inspect", stray)
check(r.returncode == 0 and "data/99" in r.stdout and "no tensor of the pickles reaches" in r.stdout,
      f"inspect notes a storage record no tensor reaches:\n{r.stdout[:1500]}")

# --- 9. hints that point the right way -------------------------------------------------

r = tsarchive("run", path("clf.pt"), "--input", "2x10:float64")
check(r.returncode == 5 and "input 'x' is float64" in r.stderr and "parameters are float32" in r.stderr,
      f"a dtype mismatch inside the model names the input and the parameters' dtype: {r.stderr}")
r = tsarchive("extra", "set", path("clf.pt"), "extra/owner.txt=me", "-o", path("prefixed.pt"))
check(r.returncode == 0 and "taken as 'owner.txt'" in r.stderr, f"extra set extra/NAME strips the prefix with a note: {r.stderr}")
files = extra_files(path("prefixed.pt")) if r.returncode == 0 else {}
check("owner.txt" in files and "extra/owner.txt" not in files, f"no extra/extra/ record: {sorted(files)}")
r = tsarchive("extra", "export", path("clf.pt"), path("meta") + "/")
check(r.returncode == 0 and "//" not in r.stdout and os.path.join(path("meta"), "config/train.yaml") in r.stdout,
      f"extra export DIR/ prints single slashes: {r.stdout}")

# A binary copied without its torch layer says where it looked.
os.makedirs(path("bin"), exist_ok=True)
shutil.copy(TSARCHIVE, path("bin"))
r = subprocess.run([os.path.join(path("bin"), os.path.basename(TSARCHIVE)), "verify", "--load", path("clf.pt")],
                   capture_output=True, text=True,
                   env={k: v for k, v in os.environ.items() if k != "TSARCHIVE_TORCH_LIBRARY"})
check(r.returncode == 5 and "looked for " + os.path.join(path("bin"), "libtsarchive_torch.so") in r.stderr,
      f"a copied binary without its torch layer says where it looked: {r.stderr}")

finish("check_workflows: every check passed")
