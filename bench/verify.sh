#!/usr/bin/env bash
# bench/verify.sh: what `tsarchive verify` and `tsarchive stamp` cost on big
# archives, side by side in one run with what they must be compared to.
#
# verify (reads every byte: SHA-256 and CRC-32 of each record, on all cores):
#   openssl dgst  openssl dgst -sha256 FILE (one SHA-256 with the CPU's SHA instructions)
#   sha256sum     coreutils
#   unzip -tq     unzip's CRC test of every entry
#   tsarchive verify (unstamped and stamped copies), and --threads 1
# stamp:
#   cp, tsarchive extra set (the same writer), stamp --keep-bytes,
#   stamp (libtorch re-save through the export hook), and Python's
#   torch.jit.save(torch.jit.load(...)) that the re-save corresponds to.
#
# The archives: big-<MB>mb.pt (128 Linear layers: many large records) for each
# of SIZES_MB, and one-<ONE_MB>mb.pt, whose weights are one record (verify
# only): there the records cannot be spread over cores, and the CRC-32 runs
# on the second core beside the SHA-256 of the same chunks.
#
# Targets: verify <= openssl dgst on ~1 GiB and on the one-record archive; stamp --keep-bytes
# within the bound of extra set (<= 1.2x cp); the re-save <= Python's load+save. Warm page cache, commands
# interleaved round-robin, median of N runs, page cache synced (untimed)
# before each run.
#
# Environment: TSARCHIVE (default build/tsarchive), SIZES_MB (default
# "200 1074"), ONE_MB (default 200; empty: skip), N (default 5), PY (default /usr/bin/python3, with torch),
# OUT (default bench/out: where the archives are made and kept, and the work copies written),
# PARTS (default "verify stamp": which tables), BEFORE (another tsarchive binary, e.g. a build of
# main before a change: its stamp re-save gets a row of its own beside this one's).
# Peak memory is each command's maxrss with its children's (wait4's rusage:
# tsarchive's worker process and Python alike), the median over the runs.
# Exit: 0 measured (read the verdicts), 2 setup error, 3 a command failed.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$PWD
SIZES_MB=${SIZES_MB:-"200 1074"}
ONE_MB=${ONE_MB-200}
N=${N:-5}
PY=${PY:-/usr/bin/python3}
OUT=${OUT:-$ROOT/bench/out}
die() { echo "bench/verify.sh: setup error: $*" >&2; exit 2; }

[[ -x $PY ]] && "$PY" -c 'import torch' 2>/dev/null || die "$PY with torch is needed to make the archives"
command -v openssl >/dev/null || die "openssl is needed (apt-get install openssl)"
TSARCHIVE=${TSARCHIVE:-$ROOT/build/tsarchive}
[[ -x $TSARCHIVE ]] || { cmake -S . -B build -G Ninja >&2 && ninja -C build -j2 >&2; } || die "build failed"
source bench/big_archives.sh
# shellcheck disable=SC2086  # SIZES_MB is a list
big_archives $SIZES_MB
ONE_ARCHIVE=
[[ -z $ONE_MB ]] || one_record_archive "$ONE_MB"

PARTS=${PARTS:-verify stamp}
BEFORE=${BEFORE:-}
[[ -z $BEFORE || -x $BEFORE ]] || die "BEFORE=$BEFORE is not an executable"
export TSARCHIVE N OUT PY ONE_ARCHIVE PARTS BEFORE
"$PY" - "${ARCHIVES[@]}" <<'PYEOF'
import os, shutil, statistics, subprocess, sys, time

TS, N, OUT, PY = os.environ["TSARCHIVE"], int(os.environ["N"]), os.environ["OUT"], os.environ["PY"]
PARTS, BEFORE = os.environ["PARTS"].split(), os.environ["BEFORE"]
RESAVE = "import sys, torch\ntorch.jit.save(torch.jit.load(sys.argv[1]), sys.argv[2])"
# The same made durable as stamp's atomic replace is (fsync of the file before it counts as written).
RESAVE_FSYNC = RESAVE + "\nimport os\nfd = os.open(sys.argv[2], os.O_RDONLY)\nos.fsync(fd)"
failed = []

def run(argv):
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, dict(os.environ, SOURCE_DATE_EPOCH="1700000000"),
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
                                       (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)])
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        failed.append(" ".join(argv[:4]))
    return time.perf_counter() - t0, usage.ru_maxrss / 1024

def table(title, cmds, base_keys):
    for make in cmds.values():
        run(make(-1))  # warm-up, and warms the page cache
    times = {k: [] for k in cmds}
    peaks = {k: [] for k in cmds}
    for i in range(N):
        for k, make in cmds.items():
            os.sync()
            seconds, peak = run(make(i))
            times[k].append(seconds)
            peaks[k].append(peak)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"\n{title}, median of {N} runs, warm cache, load average {os.getloadavg()[0]:.2f}")
    print(f"  {'command':34s} {'median ms':>10s} {'min ms':>9s} {'peak MiB':>9s} " +
          " ".join(f"{'x ' + b:>16s}" for b in base_keys))
    for k in cmds:
        print(f"  {k:34s} {med[k]:10.1f} {min(times[k]) * 1e3:9.1f} {statistics.median(peaks[k]):9.1f} " +
              " ".join(f"{med[k] / med[b]:16.2f}" for b in base_keys))
    return med

def verify_table(archive, name, stamped):
    med = table(f"verify, {name}", {
        "openssl dgst -sha256": lambda i: ["/usr/bin/openssl", "dgst", "-sha256", archive],
        "sha256sum": lambda i: ["/usr/bin/sha256sum", archive],
        "unzip -tq": lambda i: ["/usr/bin/unzip", "-tq", archive],
        "tsarchive verify": lambda i: [TS, "verify", archive],
        "tsarchive verify (stamped)": lambda i: [TS, "verify", stamped],
        "tsarchive verify --threads 1": lambda i: [TS, "verify", "--threads", "1", archive],
    }, ["openssl dgst -sha256"])
    r = med["tsarchive verify (stamped)"] / med["openssl dgst -sha256"]
    print(f"  verdict: verify / openssl dgst = {r:.2f} (target <= 1.0): {'met' if r <= 1.0 else 'MISSED'}; "
          f"sha256sum / verify = {med['sha256sum'] / med['tsarchive verify (stamped)']:.1f}x")

def stamped_copy(archive):
    stamped = os.path.join(OUT, "work-stamped.pt")
    shutil.copyfile(archive, stamped)
    subprocess.run([TS, "stamp", "--keep-bytes", "--no-git", stamped], check=True, capture_output=True)
    return stamped

if os.environ["ONE_ARCHIVE"] and "verify" in PARTS:
    one = os.environ["ONE_ARCHIVE"]
    stamped = stamped_copy(one)
    verify_table(one, f"{os.path.basename(one)}: {os.path.getsize(one) / 2**20:,.0f} MiB, weights in one record", stamped)
    os.remove(stamped)

for archive in sys.argv[1:]:
    size = os.path.getsize(archive)
    name = f"{os.path.basename(archive)}: {size / 2**20:,.0f} MiB"
    stamped = stamped_copy(archive)
    if "verify" in PARTS:
        verify_table(archive, name, stamped)
    if "stamp" not in PARTS:
        os.remove(stamped)
        continue

    work = {k: os.path.join(OUT, f"work-{k}.pt") for k in ("cp", "set", "keep", "hook", "before", "py")}
    for k in ("set", "keep", "hook", "before"):
        shutil.copyfile(archive, work[k])
    cmds = {
        "cp": lambda i: ["/bin/cp", archive, work["cp"]],
        "tsarchive extra set": lambda i: [TS, "extra", "set", work["set"], f"note.txt=run {i}"],
        "tsarchive stamp --keep-bytes": lambda i: [TS, "stamp", "--keep-bytes", "--no-git", "--field", f"run={i}", work["keep"]],
        "tsarchive stamp (libtorch re-save)": lambda i: [TS, "stamp", "--no-git", "--field", f"run={i}", work["hook"]],
        "python torch.jit load+save": lambda i: [PY, "-c", RESAVE, archive, work["py"]],
        "python load+save, fsync": lambda i: [PY, "-c", RESAVE_FSYNC, archive, work["py"]],
    }
    if BEFORE:
        cmds["BEFORE stamp (re-save)"] = lambda i: [BEFORE, "stamp", "--no-git", "--field", f"run={i}", work["before"]]
    med = table(f"stamp, {name}", cmds, ["cp", "tsarchive extra set", "python torch.jit load+save"])
    r = med["tsarchive stamp --keep-bytes"] / med["cp"]
    h = med["tsarchive stamp (libtorch re-save)"] / med["python torch.jit load+save"]
    print(f"  verdict: stamp --keep-bytes / cp = {r:.2f} (target <= 1.2): {'met' if r <= 1.2 else 'MISSED'}; "
          f"re-save / python load+save = {h:.2f} (target <= 1.0): {'met' if h <= 1.0 else 'MISSED'}")
    for path in list(work.values()) + [stamped]:
        if os.path.exists(path):
            os.remove(path)

if failed:
    print("commands that failed: " + "; ".join(sorted(set(failed))))
    sys.exit(3)
PYEOF
