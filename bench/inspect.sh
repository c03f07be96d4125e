#!/usr/bin/env bash
# bench/inspect.sh: how fast is `tsarchive inspect`, side by side with
# `unzip -l` and with Debian's python3 doing `import torch; torch.jit.load(...)`,
# on the same archives, in one run.
#
# Targets:
#   * inspect within 2x of `unzip -l` at any archive size (it must not read
#     tensor data), i.e. median(inspect) / median(unzip -l) <= 2.0
#   * inspect --json within 2.5x of `unzip -l`
#   * at least 40x faster than the Python load,
#     i.e. median(python load) / median(inspect) >= 40
#
# Archives:
#   small  testdata/mlp_scripted.pt (30 records, 16 KB)
#   many   bench/out/many.pt: MANY tiny buffers (default 2000), made here
#   big    bench/out/big.pt: ~BIG_MB MB of float32 Linear weights, made here
#          (kept and reused while its size is within 5% of the target)
#   resnet18  bench/out/resnet18.pt: torchvision's resnet18, scripted (47 MB,
#          191 records, 60 of them deflated code/),
#          made by bench/make_run_models.py when PY has torchvision (as bench/run.sh)
#
# Times are wall-clock, whole process (fork+exec to exit), warm page cache:
# every command runs once untimed first. The fast commands are interleaved
# round-robin so that noise on a shared machine hits them alike; the median
# is reported. Peak RSS of inspect on the big archive comes from
# /usr/bin/time -f %M (a fork()ed wrapper; ru_maxrss seen by a python timer
# would be the timer's own RSS inherited through vfork, so it is not used).
# With strace present, the bytes read by inspect are summed as well.
#
# Environment:
#   TSARCHIVE  binary to measure (default build/tsarchive; built if missing)
#   BEFORE     another build to time beside it (its inspect --json row: "before")
#   N          timed runs of each fast command (default 15)
#   N_PY       timed runs of each python command (default 3)
#   BIG_MB     size of the big archive in 10^6 bytes (default 500)
#   MANY       buffers in the many-records archive (default 2000; 0 skips it)
#   PY         python with torch (default /usr/bin/python3, Debian's)
#   OUT        where the archives are made and kept (default bench/out)
#
# Exit status: 0 when everything was measured, whether the targets were met
# or missed (read the verdict lines); 2 on a setup error (missing tool, no
# torch, build failed); 3 when a measured command itself failed.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$PWD

N=${N:-15}
N_PY=${N_PY:-3}
BIG_MB=${BIG_MB:-500}
MANY=${MANY:-2000}
PY=${PY:-/usr/bin/python3}
OUT=${OUT:-$ROOT/bench/out}
SMALL=$ROOT/testdata/mlp_scripted.pt

die() { echo "bench/inspect.sh: setup error: $*" >&2; exit 2; }

# --- setup ---------------------------------------------------------------------
[[ $N =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer (got '$N')"
[[ $N_PY =~ ^[1-9][0-9]*$ ]] || die "N_PY must be a positive integer (got '$N_PY')"
[[ $MANY =~ ^[0-9]+$ ]] || die "MANY must be a non-negative integer (got '$MANY')"
[[ $BIG_MB =~ ^[0-9]+([.][0-9]+)?$ ]] || die "BIG_MB must be a number (got '$BIG_MB')"
command -v unzip >/dev/null || die "unzip not found (apt-get install unzip)"
[[ -x $PY ]] || die "$PY not found: Debian's python3 with torch is needed"
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (apt-get install python3-torch)"
[[ -f $SMALL ]] || die "$SMALL is missing"

if [[ -n ${TSARCHIVE:-} ]]; then
  [[ -x $TSARCHIVE ]] || die "TSARCHIVE=$TSARCHIVE is not an executable file"
  TSARCHIVE=$(readlink -f "$TSARCHIVE")
else
  TSARCHIVE=$ROOT/build/tsarchive
  if [[ ! -x $TSARCHIVE ]]; then
    command -v cmake >/dev/null || die "build/tsarchive missing and cmake not found"
    command -v ninja >/dev/null || die "build/tsarchive missing and ninja not found"
    echo "building build/tsarchive ..." >&2
    { cmake -S . -B build -G Ninja && ninja -C build -j2 tsarchive; } >&2 || die "build failed"
  fi
fi
"$TSARCHIVE" inspect "$SMALL" >/dev/null || die "$TSARCHIVE inspect $SMALL failed"
BEFORE=${BEFORE:-}
if [[ -n $BEFORE ]]; then
  [[ -x $BEFORE ]] || die "BEFORE=$BEFORE is not an executable file"
  BEFORE=$(readlink -f "$BEFORE")
fi

mkdir -p "$OUT"

# big.pt: reuse while it is a readable ZIP within 5% of the target size.
BIG=$OUT/big.pt
big_ok() {
  [[ -f $BIG ]] && "$PY" - "$BIG" "$BIG_MB" <<'EOF'
import os, sys, zipfile
path, mb = sys.argv[1], float(sys.argv[2])
size = os.path.getsize(path)
if abs(size - mb * 1e6) > 0.05 * mb * 1e6:
    sys.exit(1)
with zipfile.ZipFile(path) as z:
    sys.exit(0 if any(n.endswith("/data.pkl") for n in z.namelist()) else 1)
EOF
}
if big_ok; then
  echo "reusing $BIG ($(stat -c %s "$BIG") bytes)" >&2
else
  echo "making $BIG (~$BIG_MB MB; takes a while) ..." >&2
  "$PY" bench/make_big_archive.py big --out "$BIG" --mb "$BIG_MB" >&2 || die "making $BIG failed"
  big_ok || die "$BIG is not the expected ~$BIG_MB MB archive"
fi

# many.pt: reuse while it holds exactly MANY tensor records.
MANY_PT=$OUT/many.pt
if (( MANY > 0 )); then
  many_ok() {
    [[ -f $MANY_PT ]] && "$PY" - "$MANY_PT" "$MANY" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    n = sum(1 for i in z.infolist() if "/data/" in i.filename)
sys.exit(0 if n == int(sys.argv[2]) else 1)
EOF
  }
  if many_ok; then
    echo "reusing $MANY_PT" >&2
  else
    echo "making $MANY_PT ($MANY tensors) ..." >&2
    "$PY" bench/make_big_archive.py many --out "$MANY_PT" --tensors "$MANY" >&2 || die "making $MANY_PT failed"
    many_ok || die "$MANY_PT does not hold $MANY tensor records"
  fi
  ARCHIVES=("small=$SMALL" "many=$MANY_PT" "big=$BIG")
else
  ARCHIVES=("small=$SMALL" "big=$BIG")
fi
RESNET=$OUT/resnet18.pt
if [[ ! -f $RESNET ]] && "$PY" -c 'import torchvision' 2>/dev/null; then
  echo "making $RESNET ..." >&2
  "$PY" bench/make_run_models.py "$RESNET" >&2 || die "making $RESNET failed"
fi
if [[ -f $RESNET ]]; then
  ARCHIVES+=("resnet18=$RESNET")
else
  echo "no torchvision for $PY: resnet18 skipped (apt-get install python3-torchvision)" >&2
fi

TIME_BIN=
if [[ -x /usr/bin/time ]] && /usr/bin/time -f %M true >/dev/null 2>&1; then TIME_BIN=/usr/bin/time; fi
STRACE_BIN=$(command -v strace || true)

# --- measure -------------------------------------------------------------------
# The timer is plain python (no torch imported in it); the children are the
# commands under test, spawned with stdout to /dev/null.
export TSARCHIVE PY N N_PY TIME_BIN STRACE_BIN BIG BEFORE
"$PY" - "${ARCHIVES[@]}" <<'EOF'
import os, re, resource, shutil, statistics, subprocess, sys, tempfile, time, zipfile

TS = os.environ["TSARCHIVE"]
PY = os.environ["PY"]
N = int(os.environ["N"])
N_PY = int(os.environ["N_PY"])
TIME_BIN = os.environ.get("TIME_BIN") or None
STRACE_BIN = os.environ.get("STRACE_BIN") or None
BIG = os.environ["BIG"]
BEFORE = os.environ.get("BEFORE") or None
LOAD = "import sys, torch; torch.jit.load(sys.argv[1])"

failed = []


def cpu_of_children():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run_once(argv):
    """Wall seconds, CPU seconds (user + system) and exit status of one whole
    process (fork+exec to exit). CPU time is what load on a shared machine
    changes least."""
    c0 = cpu_of_children()
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    t1 = time.perf_counter()
    return t1 - t0, cpu_of_children() - c0, p.returncode, p.stderr.decode(errors="replace")


class Cmd:
    def __init__(self, label, argv, runs):
        self.label, self.argv, self.runs = label, argv, runs
        self.times, self.cpu, self.error = [], [], None

    def once(self, timed=True):
        if self.error:
            return
        dt, cpu, rc, err = run_once(self.argv)
        if rc != 0:
            self.error = f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}"
            failed.append(f"{self.label}: {self.error}")
            return
        if timed:
            self.times.append(dt)
            self.cpu.append(cpu)

    @property
    def cpu_ms(self):
        return statistics.median(self.cpu) * 1e3 if self.cpu else None

    @property
    def median_ms(self):
        return statistics.median(self.times) * 1e3 if self.times else None

    @property
    def min_ms(self):
        return min(self.times) * 1e3 if self.times else None


def measure(cmds):
    for c in cmds:                       # warm-up: page cache, dynamic loader caches
        c.once(timed=False)
    fast = [c for c in cmds if c.runs == N]
    slow = [c for c in cmds if c.runs != N]
    for _ in range(N):                   # interleaved, so noise spreads evenly
        for c in fast:
            c.once()
    for _ in range(N_PY):
        for c in slow:
            c.once()


def fmt_ms(v):
    return "-" if v is None else (f"{v:,.1f}" if v >= 100 else f"{v:.2f}")


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def table(cmds, ref):
    head = ("command", "runs", "median ms", "min ms", "vs unzip -l", "cpu ms", "cpu vs unzip")
    rows = []
    for c in cmds:
        r = ratio(c.median_ms, ref.median_ms)
        rows.append((c.label, str(len(c.times)) if not c.error else "0",
                     fmt_ms(c.median_ms) if not c.error else "FAILED",
                     fmt_ms(c.min_ms) if not c.error else "-",
                     f"{r:.2f}x" if r is not None else "-",
                     fmt_ms(c.cpu_ms) if not c.error else "-",
                     f"{ratio(c.cpu_ms, ref.cpu_ms):.2f}x" if not c.error and ref.cpu_ms else "-"))
    w = [max(len(x[i]) for x in rows + [head]) for i in range(len(head))]
    line = lambda cells: "  " + "  ".join(
        cell.ljust(w[i]) if i == 0 else cell.rjust(w[i]) for i, cell in enumerate(cells))
    print(line(head))
    print(line(["-" * x for x in w]))
    for r in rows:
        print(line(r))
    for c in cmds:
        if c.error:
            print(f"  ! {c.label} failed: {c.error}")


def verdict(text, value, op, target):
    if value is None:
        print(f"  {text:<42}  n/a (a command failed)  MISS")
        return False
    ok = value <= target if op == "<=" else value >= target
    print(f"  {text:<42} {value:8.2f}x  (target {op} {target:g}x)  {'PASS' if ok else 'MISS'}")
    return ok


def describe(path):
    size = os.path.getsize(path)
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
    tensors = sum(1 for i in infos if "/data/" in i.filename and not i.filename.endswith("/"))
    return size, len(infos), tensors


def archive_cmds(path):
    cmds = [
        Cmd("tsarchive inspect", [TS, "inspect", path], N),
        Cmd("tsarchive inspect --json", [TS, "inspect", "--json", path], N),
        Cmd("unzip -l", ["unzip", "-l", path], N),
        Cmd("python3: torch.jit.load", [PY, "-c", LOAD, path], N_PY),
    ]
    if BEFORE:
        cmds.append(Cmd("before: inspect --json", [BEFORE, "inspect", "--json", path], N))
    return cmds


print(f"tsarchive inspect benchmark  (warm page cache; median of N={N} runs, python load N_PY={N_PY})")
print(f"  binary   {TS} ({os.path.getsize(TS):,} bytes)")
print(f"  host     {os.uname().nodename}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
ver = subprocess.run([PY, "-c", "import sys, torch; print(sys.version.split()[0], torch.__version__)"],
                     capture_output=True, text=True).stdout.split()
print(f"  python   {PY} {ver[0] if ver else '?'}, torch {ver[1] if len(ver) > 1 else '?'}")
print()

# Floors: what any process start costs here, and what python spends before it
# opens the file.
base = [
    Cmd("/bin/true (process start floor)", ["/bin/true"], N),
    Cmd("tsarchive --help (startup floor)", [TS, "--help"], N),
    Cmd("unzip -v (startup floor)", ["unzip", "-v"], N),
    Cmd("python3 -c pass", [PY, "-c", "pass"], N),
    Cmd("python3: import torch only", [PY, "-c", "import torch"], N_PY),
]
measure(base)
print("== baselines (no archive) ==")
head = ("command", "runs", "median ms", "min ms")
rows = [(c.label, str(len(c.times)) if not c.error else "0",
         fmt_ms(c.median_ms) if not c.error else "FAILED", fmt_ms(c.min_ms)) for c in base]
w = [max(len(x[i]) for x in rows + [head]) for i in range(len(head))]
for r in [head, tuple("-" * x for x in w)] + rows:
    print("  " + "  ".join(cell.ljust(w[i]) if i == 0 else cell.rjust(w[i]) for i, cell in enumerate(r)))
print()

summary = []
for spec in sys.argv[1:]:
    name, path = spec.split("=", 1)
    size, entries, tensors = describe(path)
    rel = os.path.relpath(path)
    human = f"{size / 1e6:,.1f} MB" if size >= 1e6 else f"{size / 1e3:,.1f} kB"
    print(f"== {name}: {rel}  ({size:,} bytes = {human}; "
          f"{entries:,} ZIP entries, {tensors:,} tensor records) ==")
    cmds = archive_cmds(path)
    measure(cmds)
    insp, js, unz, pyl = cmds[:4]
    table(cmds, unz)
    a = verdict("inspect / unzip -l", ratio(insp.median_ms, unz.median_ms), "<=", 2.0)
    b = verdict("inspect --json / unzip -l", ratio(js.median_ms, unz.median_ms), "<=", 2.5)
    c = verdict("python torch.jit.load / inspect", ratio(pyl.median_ms, insp.median_ms), ">=", 40.0)
    summary.append((name, size, insp, js, unz, pyl, a, b, c))
    print()

# Peak RSS and bytes read on the big archive: inspect must not touch tensor data.
print(f"== memory and I/O on the big archive ({os.path.relpath(BIG)}) ==")
big_size = os.path.getsize(BIG)
print(f"  file size                          {big_size / 2**20:10,.1f} MiB")
if TIME_BIN:
    for label, argv in (("tsarchive inspect", [TS, "inspect", BIG]),
                        ("tsarchive inspect --json", [TS, "inspect", "--json", BIG]),
                        ("unzip -l", ["unzip", "-l", BIG]),
                        ("python3: torch.jit.load", [PY, "-c", LOAD, BIG])):
        r = subprocess.run([TIME_BIN, "-f", "%M", *argv], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        kib = int(r.stderr.strip().splitlines()[-1])
        print(f"  peak RSS {label:<26}{kib / 1024:10,.1f} MiB  = {kib * 1024 / big_size * 100:7.2f}% of the file  "
              f"(/usr/bin/time -f %M)")
else:
    print("  (/usr/bin/time not found: peak RSS skipped; apt-get install time)")
if STRACE_BIN:
    # Sum what read-family syscalls returned, over the whole process (shared
    # libraries, locale files and the archive alike), and look for an mmap of
    # the archive itself.
    for label, argv in (("tsarchive inspect", [TS, "inspect", BIG]),
                        ("unzip -l", ["unzip", "-l", BIG])):
        with tempfile.NamedTemporaryFile("r", suffix=".strace") as log:
            subprocess.run([STRACE_BIN, "-f", "-qq", "-e", "signal=none", "-e",
                            "trace=openat,close,read,pread64,readv,preadv,preadv2,mmap",
                            "-o", log.name, *argv],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            total, fd, mapped = 0, None, False
            for ln in log:
                m = re.search(r'openat\(.*"([^"]*)".*\)\s+=\s+(\d+)', ln)
                if m and os.path.abspath(m.group(1)) == os.path.abspath(BIG):
                    fd = m.group(2)
                m = re.search(r'^(?:\d+\s+)?(read|pread64|readv|preadv2?)\(.*\)\s+=\s+(\d+)', ln)
                if m:
                    total += int(m.group(2))
                if fd and re.search(rf'mmap\([^,]*, \d+, [^,]*, [^,]*, {fd}, ', ln):
                    mapped = True
                if fd and re.search(rf'close\({fd}\)', ln):
                    fd = None
        print(f"  bytes read {label:<24}{total:14,} B = {total / big_size * 100:6.3f}% of the file  "
              f"(strace, all read syscalls; archive mmapped: {'yes' if mapped else 'no'})")
else:
    print("  (strace not found: bytes-read check skipped)")
print()

print("== summary ==")
print(f"  {'archive':<8} {'size MB':>9} {'inspect ms':>11} {'unzip -l ms':>12} {'insp/unzip':>11} "
      f"{'json/unzip':>11} {'python ms':>10} {'py/insp':>9}  verdicts (<=2x unzip, json <=2.5x, >=40x python)")
for name, size, insp, js, unz, pyl, a, b, c in summary:
    r1, r2, r3 = ratio(insp.median_ms, unz.median_ms), ratio(js.median_ms, unz.median_ms), ratio(pyl.median_ms, insp.median_ms)
    f = lambda r: f"{r:.2f}x" if r is not None else "-"
    print(f"  {name:<8} {size / 1e6:9,.3f} {fmt_ms(insp.median_ms):>11} {fmt_ms(unz.median_ms):>12} {f(r1):>11} "
          f"{f(r2):>11} {fmt_ms(pyl.median_ms):>10} {f(r3):>9}  "
          + " ".join("PASS" if v else "MISS" for v in (a, b, c)))
all_ok = all(a and b and c for *_, a, b, c in summary)
print()
print("overall: " + ("all targets met" if all_ok else "at least one target MISSED (see the verdict lines)"))
if failed:
    print("some measured commands FAILED:")
    for f in failed:
        print("  " + f)
    sys.exit(3)
EOF
