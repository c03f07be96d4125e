#!/usr/bin/python3
"""Crash-safe writes: kill -9 every in-place writer at random moments; fill the disk.

Run by CTest with Debian's python3 (exit 77, skipped, when torch is missing):

    /usr/bin/python3 tests/cli/crash_safe.py TSARCHIVE [--iterations N] [--size-mb M] [--seed S]

1. Real PyTorch saves a scripted module with a SIZE_MB parameter (fixed seed).
2. Each writing command (extra set/rm, extra set --in-place, stamp --keep-bytes,
   extra import --prune, stamp by libtorch re-save, stamp -o, extra set -o,
   run --record) runs once
   uninterrupted on a copy: its duration and the size and CRC-32 of what it writes.
3. ITERATIONS times, round robin over the commands: a fresh copy, the writer
   started in its own process group and SIGKILLed after a seeded random delay
   spread over 0..1.15x its duration. Then:
     - the target is byte-identical to the old archive (or absent, for a new -o
       path) or to the complete new one; an --in-place edit's journal is first
       resolved by the next edit of the file (a no-op one), as the tool documents;
     - the input of -o commands is unchanged;
     - `tsarchive verify` passes, and every LOAD_EVERY-th iteration
       `tsarchive verify --load` (libtorch's torch::jit::load) passes too;
     - the temp files and staging folders the killed writer left are gone after
       the next run (a no-op edit of the target, or the same -o command again,
       which must then write the same new bytes), and nothing else is left.
4. Disk full: each writer on a copy in a tmpfs too small for its output (in a
   private mount namespace, where the machine allows one) and under
   RLIMIT_FSIZE (always): exit 4, one error line, the original byte-identical,
   no temp file or staging folder left.
Prints the numbers at the end.
"""

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

parser = argparse.ArgumentParser()
parser.add_argument("tsarchive")
parser.add_argument("--iterations", type=int, default=42)
parser.add_argument("--size-mb", type=int, default=200)
parser.add_argument("--seed", type=int, default=8)
parser.add_argument("--load-every", type=int, default=7)
parser.add_argument("--disk-full-child", metavar="WORKDIR", help=argparse.SUPPRESS)
args = parser.parse_args()
TSARCHIVE = os.path.abspath(args.tsarchive)

ENV = {k: v for k, v in os.environ.items()
       if not k.startswith(("GITHUB_", "GITLAB_", "CI", "JENKINS_", "BUILDKITE", "CIRCLE"))}
ENV.update(SOURCE_DATE_EPOCH="1700000000", LC_ALL="C")
STAMP = ["--no-host", "--no-git"]
BLOB = "blob.bin"  # an 8 MiB extra value, next to the archive


def fingerprint(path):
    """(size, CRC-32) of the file, None when it is absent.

    Every check here asks whether a file holds exactly one of two or three
    known byte strings that this test's own writers made, never whether an
    adversary forged one: a torn or stale file differs in its size or, with
    odds of 2**-32, in its CRC. SHA-256 in Python took about half of this
    test's time on a machine without SHA instructions (1.1 s per 200 MB,
    some 80 times); CRC-32 takes 0.2 s.
    """
    if not os.path.exists(path):
        return None
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            crc = zlib.crc32(chunk, crc)
        return os.fstat(f.fileno()).st_size, crc


def leftovers(folder, name):
    """Temp files and staging folders of `name` (the journal is reported apart)."""
    prefix = "." + name + ".tsarchive-"
    return sorted(n for n in os.listdir(folder) if n.startswith(prefix) and n != prefix + "journal")


def journal(path):
    folder, name = os.path.split(path)
    return os.path.join(folder, "." + name + ".tsarchive-journal")


def tool(*argv, **kw):
    return subprocess.run([TSARCHIVE, *argv], env=ENV, capture_output=True, text=True, **kw)


def must(*argv):
    r = tool(*argv)
    if r.returncode != 0:
        sys.exit(f"FAIL: tsarchive {' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


# name -> (argv given the target T, output O and work folder W, writes to -o?)
COMMANDS = {
    "extra set (text)": (lambda t, o, w: ["extra", "set", t, "note.txt=crash test"], False),
    "extra set (8 MiB file)": (lambda t, o, w: ["extra", "set", t, f"{BLOB}=@{w}/{BLOB}"], False),
    "extra set --in-place": (lambda t, o, w: ["extra", "set", "--in-place", t, "note.txt=crash test"], False),
    "extra rm": (lambda t, o, w: ["extra", "rm", t, "labels.json"], False),
    "extra import --prune": (lambda t, o, w: ["extra", "import", "--prune", t, f"{w}/import"], False),
    "stamp --keep-bytes": (lambda t, o, w: ["stamp", "--keep-bytes", *STAMP, t], False),
    "stamp (libtorch re-save)": (lambda t, o, w: ["stamp", *STAMP, t], False),
    "run --record": (lambda t, o, w: ["run", "--record", "--input", "4", "--seed", "1", t], False),
    "stamp --keep-bytes -o": (lambda t, o, w: ["stamp", "--keep-bytes", *STAMP, t, "-o", o], True),
    "stamp -o (libtorch re-save)": (lambda t, o, w: ["stamp", *STAMP, t, "-o", o], True),
    "extra set -o": (lambda t, o, w: ["extra", "set", t, "-o", o, "note.txt=crash test"], True),
}


def make_archive(path, size_mb):
    import torch

    class Big(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(n))
            self.scale = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            return x * self.scale + self.weight[:4]

    torch.manual_seed(args.seed)
    module = torch.jit.script(Big(size_mb * (1 << 20) // 4))
    torch.jit.save(module, path, _extra_files={"labels.json": '["a", "b"]', "config.yaml": "lr: 0.1\n"})


def run_killed(argv, delay):
    """Starts the writer in its own process group; SIGKILLs the group after `delay` s."""
    p = subprocess.Popen([TSARCHIVE, *argv], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        p.wait(timeout=delay)
        finished = True
    except subprocess.TimeoutExpired:
        finished = False
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if finished and p.returncode != 0:
        sys.exit(f"FAIL: tsarchive {' '.join(argv)} (not killed): exit {p.returncode}: {err.strip()}")
    return finished


def crash_loop(work, base):
    folder = os.path.join(work, "k")
    os.makedirs(folder)
    target, out = os.path.join(folder, "model.pt"), os.path.join(folder, "out.pt")
    base_print = fingerprint(base)
    old_out = os.path.join(work, "old_out.pt")  # what is at -o OUT before, on odd rounds
    shutil.copyfile(base, old_out)
    must("extra", "set", old_out, "owner=an older output")
    old_out_print = fingerprint(old_out)

    # Uninterrupted: how long each writer takes and what it writes (after a
    # warm-up read, so that the first one is not timed with a cold cache).
    must("verify", base)
    duration, new_print = {}, {}
    for name, (argv_of, to_out) in COMMANDS.items():
        shutil.copyfile(base, target)
        start = time.monotonic()
        must(*argv_of(target, out, work))
        duration[name] = time.monotonic() - start
        new_print[name] = fingerprint(out if to_out else target)
        if new_print[name] in (base_print, None):
            sys.exit(f"FAIL: {name} wrote nothing")
        for p in (target, out):
            if os.path.exists(p):
                os.remove(p)
        if leftovers(folder, "model.pt") or leftovers(folder, "out.pt"):
            sys.exit(f"FAIL: {name} left files uninterrupted: {os.listdir(folder)}")
    # Same command, same input, same bytes? (the checks below rely on it)
    for name in ("stamp (libtorch re-save)", "run --record"):
        argv_of, _ = COMMANDS[name]
        shutil.copyfile(base, target)
        must(*argv_of(target, out, work))
        if fingerprint(target) != new_print[name]:
            sys.exit(f"FAIL: {name} is not reproducible: two runs wrote different bytes")
        os.remove(target)

    rng = random.Random(args.seed)
    stats = collections.defaultdict(collections.Counter)
    names = list(COMMANDS)
    for i in range(args.iterations):
        name = names[i % len(names)]
        argv_of, to_out = COMMANDS[name]
        shutil.copyfile(base, target)
        out_before = None
        if to_out:
            if (i // len(names)) % 2 == 1:
                shutil.copyfile(old_out, out)
                out_before = old_out_print
            elif os.path.exists(out):
                os.remove(out)
        written = out if to_out else target
        old = out_before if to_out else base_print
        delay = rng.uniform(0, 1.15 * duration[name])
        s = stats[name]
        s["runs"] += 1
        if run_killed(argv_of(target, out, work), delay):
            s["finished before the kill"] += 1
        else:
            s["killed"] += 1

        if os.path.exists(journal(written)):
            s["journal left (resolved by the next edit)"] += 1
            # The next edit finishes or undoes it (readers never apply a journal):
            # a no-op edit of the file, as a user would run.
            must("extra", "rm", "--missing-ok", written, "crash-safe/absent")
            if os.path.exists(journal(written)):
                sys.exit(f"FAIL: {name}: the next edit left the journal")
        now = fingerprint(written)
        if now == old:
            s["old"] += 1
        elif now == new_print[name]:
            s["new"] += 1
        else:
            sys.exit(f"FAIL: iteration {i}, {name}, killed after {delay:.3f} s: {written} is neither the old "
                     f"nor the new archive")
        if to_out and fingerprint(target) != base_print:
            sys.exit(f"FAIL: iteration {i}, {name}: the input of -o changed")
        if now is not None:
            must("verify", written)
            if i % args.load_every == 0:
                must("verify", "--load", written)  # libtorch's torch::jit::load
                s["loaded by libtorch"] += 1

        left = leftovers(folder, os.path.basename(written))
        if left:
            s["runs that left files"] += 1
            s["files left"] += len(left)
        # The next run: for -o, the same command again (it must write the same
        # bytes); for the target, a no-op edit, which still opens it to edit.
        if to_out:
            must(*argv_of(target, out, work))
            if fingerprint(out) != new_print[name]:
                sys.exit(f"FAIL: {name}: the run after a kill wrote different bytes")
        else:
            r = must("extra", "rm", "--missing-ok", target, "no-such-name")
            if left and "removed %d temp file(s)" % len(left) not in r.stderr:
                sys.exit(f"FAIL: {name}: the next run did not say it removed {left}: {r.stderr.strip()}")
        still = leftovers(folder, os.path.basename(written))
        if still:
            sys.exit(f"FAIL: iteration {i}, {name}: left after the next run: {still} (left by the kill: {left})")
        s["files cleaned by the next run"] += len(left)
        if set(os.listdir(folder)) - {"model.pt", "out.pt"}:
            sys.exit(f"FAIL: iteration {i}, {name}: unexpected files: {os.listdir(folder)}")
    return duration, stats


# --- disk full ---------------------------------------------------------------

# name -> argv given the target T and output O; each needs more space than is left.
DISK_FULL = {
    "extra set": lambda t, o, w: ["extra", "set", t, "note.txt=disk full"],
    "extra set --in-place (40 MiB value)": lambda t, o, w: ["extra", "set", "--in-place", t,
                                                           f"big.bin=@{w}/big.bin"],
    "stamp --keep-bytes": lambda t, o, w: ["stamp", "--keep-bytes", *STAMP, t],
    "stamp (libtorch re-save)": lambda t, o, w: ["stamp", *STAMP, t],
    "run --record": lambda t, o, w: ["run", "--record", "--input", "4", t],
    "extra set -o": lambda t, o, w: ["extra", "set", t, "-o", o, "note.txt=disk full"],
}


def disk_full_cases(folder, base, work, limit_fsize=None):
    """Runs every DISK_FULL writer on a copy of `base` in `folder`; returns (results, failures)."""
    import resource

    def preexec():
        if limit_fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so write() fails with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))

    target, out = os.path.join(folder, "model.pt"), os.path.join(folder, "out.pt")
    results, failures = [], []
    for name, argv_of in DISK_FULL.items():
        shutil.copyfile(base, target)
        before = fingerprint(target)
        r = subprocess.run([TSARCHIVE, *argv_of(target, out, work)], env=ENV, capture_output=True, text=True,
                           preexec_fn=preexec)
        err = r.stderr.strip().splitlines()
        problems = []
        if r.returncode != 4:
            problems.append(f"exit {r.returncode}, want 4")
        errors = [line for line in err if line.startswith("tsarchive: error:")]
        if len(errors) != 1 or len(err) != 1:
            problems.append(f"want one error line, got {err}")
        if fingerprint(target) != before:
            problems.append("the original changed")
        if os.path.exists(out):
            problems.append("a partial -o file is left")
        left = [n for n in os.listdir(folder) if n not in ("model.pt",)]
        if left:
            problems.append(f"left {left}")
        results.append((name, r.returncode, err[0] if err else ""))
        if problems:
            failures.append(f"{name}: " + "; ".join(problems) + f" (stderr: {r.stderr.strip()[:300]})")
        for n in os.listdir(folder):  # the next case starts clean, whatever this one left
            p = os.path.join(folder, n)
            if os.path.isdir(p):
                shutil.rmtree(p)
            else:
                os.remove(p)
    return results, failures


def disk_full_child(work):
    """In a private mount namespace: a tmpfs just big enough for the archive."""
    base = os.path.join(work, "base.pt")
    mnt = os.path.join(work, "tmpfs")
    os.makedirs(mnt, exist_ok=True)
    size = os.path.getsize(base) + min(24 << 20, os.path.getsize(base) // 4)  # no room for a second copy
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt], check=True)
    results, failures = disk_full_cases(mnt, base, work)
    for name, code, line in results:
        print(f"RESULT\t{name}\t{code}\t{line}")
    for f in failures:
        print(f"FAILURE\t{f}")


def disk_full(work, base):
    with open(os.path.join(work, "big.bin"), "wb") as f:
        f.write(os.urandom(40 << 20))
    report, failures = [], []
    # A real full disk where a private mount namespace is allowed (root, or CAP_SYS_ADMIN).
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode == 0:
        r = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, os.path.abspath(__file__),
                            TSARCHIVE, "--disk-full-child", work], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"tmpfs child failed: {r.stderr.strip()[-500:]}")
        for line in r.stdout.splitlines():
            kind, *rest = line.split("\t")
            if kind == "RESULT":
                report.append(("tmpfs",) + tuple(rest))
            elif kind == "FAILURE":
                failures.append("tmpfs: " + rest[0])
    else:
        report.append(("tmpfs", "skipped: no private mount namespace here", "", ""))
    # Everywhere: a file size limit at the archive's size (every writer here writes a bigger file).
    folder = os.path.join(work, "fsize")
    os.makedirs(folder)
    results, fails = disk_full_cases(folder, base, work, limit_fsize=os.path.getsize(base))
    report += [("RLIMIT_FSIZE",) + r for r in results]
    failures += ["RLIMIT_FSIZE: " + f for f in fails]
    return report, failures


def main():
    if args.disk_full_child:
        disk_full_child(args.disk_full_child)
        return 0
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch is not installed for this python; skipping")
        return 77
    work = tempfile.mkdtemp(prefix="tsarchive-crash-")
    try:
        started = time.monotonic()
        base = os.path.join(work, "base.pt")
        make_archive(base, args.size_mb)
        with open(os.path.join(work, BLOB), "wb") as f:
            f.write(random.Random(args.seed).randbytes(8 << 20))
        os.makedirs(os.path.join(work, "import", "config"))
        with open(os.path.join(work, "import", "config", "train.yaml"), "w") as f:
            f.write("epochs: 3\n")
        duration, stats = crash_loop(work, base)
        report, failures = disk_full(work, base)

        print(f"archive: {os.path.getsize(base) / 1e6:.0f} MB, {args.iterations} iterations, seed {args.seed}")
        print(f"{'command':30} {'alone':>7} {'runs':>5} {'killed':>6} {'old':>4} {'new':>4} {'journal':>7} "
              f"{'left':>5} {'cleaned':>7} {'loaded':>6}")
        total = collections.Counter()
        for name in COMMANDS:
            s = stats[name]
            total.update(s)
            print(f"{name:30} {duration[name]:6.2f}s {s['runs']:5} {s['killed']:6} {s['old']:4} {s['new']:4} "
                  f"{s['journal left (resolved by the next edit)']:7} {s['files left']:5} "
                  f"{s['files cleaned by the next run']:7} {s['loaded by libtorch']:6}")
        print(f"{'total':30} {'':7} {total['runs']:5} {total['killed']:6} {total['old']:4} {total['new']:4} "
              f"{total['journal left (resolved by the next edit)']:7} {total['files left']:5} "
              f"{total['files cleaned by the next run']:7} {total['loaded by libtorch']:6}")
        print("disk full:")
        for how, name, code, line in report:
            print(f"  {how:12} {name:38} exit {code!s:2} {line[:110]}")
        for f in failures:
            print("FAIL: disk full: " + f)
        print(f"took {time.monotonic() - started:.0f} s")
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


sys.exit(main())
