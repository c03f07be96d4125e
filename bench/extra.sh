#!/usr/bin/env bash
# bench/extra.sh: what `tsarchive extra set` costs on big archives, side by
# side in one run with the things it must be compared to:
#   cp            a plain copy (coreutils cp: copy_file_range, no fsync)
#   cp+fsync      the copy made durable (cp, then coreutils `sync FILE`)
#   tsarchive     extra set: atomic rewrite (temp file, fsync, rename)
#   --in-place    extra set --in-place: journaled tail rewrite, O(1) in size
#   libzip        zip_file_add + zip_close (bench/libzip_set.c): libzip's rewrite
#   zipfile 'a'   Python's zipfile append mode (no fsync, not atomic)
#
# Targets: tsarchive extra set <= 1.2x cp; --in-place <= 20 ms on
# 1 GiB. Before each timed run the page cache is synced (untimed), so that a
# command that does not fsync (cp, zipfile) does not leave its writeback to
# be paid by the next one. Each command sets a new value of one extra file per run (so every
# run really writes); commands are interleaved round-robin, warm page cache,
# median of N runs. Peak RSS from /usr/bin/time -f %M.
#
# Environment: TSARCHIVE (default build/tsarchive), SIZES_MB (default
# "200 1074"), N (default 5), PY (default /usr/bin/python3, Debian's, with torch
# to make the archives). Archives are kept in bench/out/ and reused.
# Exit: 0 measured (read the verdicts), 2 setup error, 3 a command failed.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$PWD
SIZES_MB=${SIZES_MB:-"200 1074"}
N=${N:-5}
PY=${PY:-/usr/bin/python3}
OUT=$ROOT/bench/out
die() { echo "bench/extra.sh: setup error: $*" >&2; exit 2; }

[[ -x $PY ]] && "$PY" -c 'import torch' 2>/dev/null || die "$PY with torch is needed to make the archives"
TSARCHIVE=${TSARCHIVE:-$ROOT/build/tsarchive}
[[ -x $TSARCHIVE ]] || { cmake -S . -B build -G Ninja >&2 && ninja -C build -j2 tsarchive >&2; } || die "build failed"
mkdir -p "$OUT"
cc -O2 -o "$OUT/libzip_set" bench/libzip_set.c $(pkg-config --cflags --libs libzip) || die "cannot build bench/libzip_set.c"

source bench/big_archives.sh
# shellcheck disable=SC2086  # SIZES_MB is a list
big_archives $SIZES_MB

export TSARCHIVE N OUT PY
"$PY" - "${ARCHIVES[@]}" <<'PYEOF'
import os, shutil, statistics, subprocess, sys, time

TS, N, OUT = os.environ["TSARCHIVE"], int(os.environ["N"]), os.environ["OUT"]
LIBZIP = os.path.join(OUT, "libzip_set")
APPEND = "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'a') as z: z.writestr(sys.argv[2], sys.argv[3])"
failed = []

def run(argv):
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
    _, status, _ = os.wait4(pid, 0)
    dt = time.perf_counter() - t0
    if status != 0:
        failed.append(" ".join(argv[:4]))
    return dt


def peak_rss_kib(argv):
    """Peak RSS from /usr/bin/time (a fork()ed wrapper: a vfork()ed child's
    ru_maxrss would include this timer's own memory)."""
    if not os.path.exists("/usr/bin/time"):
        return None
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    return int(p.stderr.strip().splitlines()[-1]) if p.returncode == 0 else None

for archive in sys.argv[1:]:
    size = os.path.getsize(archive)
    work = {k: os.path.join(OUT, f"work-{k}.pt") for k in ("cp", "ts", "inplace", "libzip", "append")}
    for k in ("ts", "inplace", "libzip", "append"):
        shutil.copyfile(archive, work[k])
    top = subprocess.run([TS, "inspect", "--json", archive], capture_output=True, text=True).stdout
    top = __import__("json").loads(top)["archive"]["top_folder"]
    cmds = {
        "cp": lambda i: ["/bin/cp", archive, work["cp"]],
        "cp+fsync": lambda i: ["/bin/sh", "-c", f"cp '{archive}' '{work['cp']}' && sync '{work['cp']}'"],
        "tsarchive extra set": lambda i: [TS, "extra", "set", work["ts"], f"note.txt=run {i}"],
        "extra set --in-place": lambda i: [TS, "extra", "set", "--in-place", work["inplace"], f"note.txt=run {i}"],
        "libzip rewrite": lambda i: [LIBZIP, work["libzip"], f"{top}/extra/note.txt", f"run {i}"],
        "python zipfile 'a'": lambda i: [sys.executable, "-c", APPEND, work["append"], f"{top}/extra/note{i}.txt", f"run {i}"],
    }
    times = {k: [] for k in cmds}
    for k, make in cmds.items():
        run(make(-1))  # warm-up
    for i in range(N):
        for k, make in cmds.items():
            os.sync()  # no dirty pages left by the previous command to bill to this one
            times[k].append(run(make(i)))
    rss = {k: peak_rss_kib(make(N)) for k, make in cmds.items()}
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"\n{os.path.basename(archive)}: {size / 2**20:,.0f} MiB, median of {N} runs, warm cache")
    print(f"  {'command':24s} {'median ms':>10s} {'min ms':>9s} {'x cp':>7s} {'x cp+fsync':>11s} {'peak RSS':>10s}")
    for k in cmds:
        print(f"  {k:24s} {med[k]:10.1f} {min(times[k]) * 1e3:9.1f} {med[k] / med['cp']:7.2f} "
              f"{med[k] / med['cp+fsync']:11.2f} " + (f"{rss[k] / 1024:8.1f} MiB" if rss[k] else "       -"))
    ratio = med["tsarchive extra set"] / med["cp"]
    print(f"  verdict: extra set / cp = {ratio:.2f} (target <= 1.2): {'met' if ratio <= 1.2 else 'MISSED'}; "
          f"extra set / cp+fsync = {med['tsarchive extra set'] / med['cp+fsync']:.2f}")
    inplace = med["extra set --in-place"]
    print(f"  verdict: --in-place {inplace:.1f} ms (target <= 20 ms): {'met' if inplace <= 20 else 'MISSED'}; "
          f"{med['libzip rewrite'] / med['tsarchive extra set']:.1f}x faster than libzip's rewrite")
    for path in work.values():
        if os.path.exists(path):
            os.remove(path)

if failed:
    print("commands that failed: " + "; ".join(sorted(set(failed))))
    sys.exit(3)
PYEOF
