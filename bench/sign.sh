#!/usr/bin/env bash
# bench/sign.sh: what `tsarchive sign` and `tsarchive verify --key` cost, side
# by side in one run with OpenSSF's model_signing (`python -m model_signing
# sign key` / `verify key`) and with `openssl dgst -sha256` over the same
# bytes, the hashing floor.
#
# Models: bench/out/big-<MB>mb.pt (~1 GiB archive, made by make_big_archive.py
# when missing) and bench/out/sign-dir/, a directory of DIR_FILES files of
# DIR_MB MB each (random bytes) plus a few small ones. verify of an archive
# also runs verify's own checks of the archive (every record's CRC-32, and its
# SHA-256 where a stamp or an embedded signature compares it), which
# model_signing does not: that pass is in its time, on the other core.
# For the archive, two more rows: `sign --embed -o COPY` (digests every record
# and writes the signed copy: a read and a write of the archive) and `verify
# --key` of that copy (the embedded signature checked against the digests
# verify's own pass makes: no second hashing pass).
#
# Targets: sign and verify at most 1.1x the openssl dgst floor, and at least
# 3x faster than model_signing. Warm page cache, commands interleaved
# round-robin, median of N runs.
#
# Environment: TSARCHIVE (default build/tsarchive), MB (default 1074), DIR_FILES
# (default 6), DIR_MB (default 128), N (default 3), PY (default /usr/bin/python3,
# with torch, to make the archive), MS_PY (a python with model_signing; default
# build/tests/signing-venv/bin/python, else .venv-signing/bin/python).
# Exit: 0 measured (read the ratios), 2 setup error, 3 a command failed.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$PWD
MB=${MB:-1074}
DIR_FILES=${DIR_FILES:-6}
DIR_MB=${DIR_MB:-128}
N=${N:-3}
PY=${PY:-/usr/bin/python3}
OUT=$ROOT/bench/out
die() { echo "bench/sign.sh: setup error: $*" >&2; exit 2; }

TSARCHIVE=${TSARCHIVE:-$ROOT/build/tsarchive}
[[ -x $TSARCHIVE ]] || die "build tsarchive first ($TSARCHIVE)"
if [[ -z ${MS_PY:-} ]]; then
  for candidate in "$ROOT/build/tests/signing-venv/bin/python" "$ROOT/.venv-signing/bin/python"; do
    [[ -x $candidate ]] && { MS_PY=$candidate; break; }
  done
fi
[[ -n ${MS_PY:-} ]] && "$MS_PY" -c 'import model_signing, OpenSSL' 2>/dev/null ||
  die "a python with model_signing is needed: python3 -m venv .venv-signing && .venv-signing/bin/pip install 'model_signing>=1.1,<1.2' pyopenssl (or MS_PY=...)"
command -v openssl >/dev/null || die "openssl is needed"
source bench/big_archives.sh
big_archives "$MB"
ARCHIVE=${ARCHIVES[0]}

DIR=$OUT/sign-dir
if [[ ! -f $DIR/.made-$DIR_FILES-$DIR_MB ]]; then
  echo "making $DIR ($DIR_FILES x $DIR_MB MB) ..." >&2
  rm -rf "$DIR" && mkdir -p "$DIR/tokenizer"
  for ((i = 0; i < DIR_FILES; i++)); do head -c "$((DIR_MB << 20))" /dev/urandom >"$DIR/model-0000$i.safetensors"; done
  echo '{"architectures": ["Bench"]}' >"$DIR/config.json"
  head -c 2000000 /dev/urandom | base64 >"$DIR/tokenizer/vocab.txt"
  touch "$DIR/.made-$DIR_FILES-$DIR_MB"
fi
KEYS=$OUT/sign-keys
mkdir -p "$KEYS"
[[ -f $KEYS/key.pem ]] || openssl ecparam -name prime256v1 -genkey -noout -out "$KEYS/key.pem"
openssl ec -in "$KEYS/key.pem" -pubout -out "$KEYS/pub.pem" 2>/dev/null

export TSARCHIVE N OUT MS_PY ARCHIVE DIR KEYS
python3 - <<'PYEOF'
import glob, os, statistics, subprocess, sys, time

TS, N, MS, KEYS = os.environ["TSARCHIVE"], int(os.environ["N"]), os.environ["MS_PY"], os.environ["KEYS"]
KEY, PUB = f"{KEYS}/key.pem", f"{KEYS}/pub.pem"
failed = []

def timed(argv):
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        failed.append(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.decode()[-300:]}")
    return dt

def files_of(model):
    if os.path.isfile(model):
        return [model]
    return sorted(p for p in glob.glob(model + "/**", recursive=True) if os.path.isfile(p) and not p.endswith(".sig")
                  and "/.made-" not in p)

def bench(model, label):
    size = sum(os.path.getsize(p) for p in files_of(model))
    ts_sig, ms_sig = f"{OUT_}/{label}.ts.sig", f"{OUT_}/{label}.ms.sig"
    commands = {
        "openssl dgst -sha256": ["openssl", "dgst", "-sha256", *files_of(model)],
        "tsarchive sign": [TS, "sign", model, "--key", KEY, "-o", ts_sig],
        "tsarchive verify --key": [TS, "verify", model, "--key", PUB, "--signature", ts_sig],
        "model_signing sign key": [MS, "-m", "model_signing", "sign", "key", "--private_key", KEY,
                                   "--signature", ms_sig, model],
        "model_signing verify key": [MS, "-m", "model_signing", "verify", "key", "--public_key", PUB,
                                     "--signature", ms_sig, model],
    }
    if os.path.isfile(model):  # the signature inside a copy of the archive (the whole archive is written)
        embedded = f"{OUT_}/{label}.embedded.pt"
        commands["tsarchive sign --embed -o"] = [TS, "sign", model, "--key", KEY, "--embed", "-o", embedded]
        commands["tsarchive verify (embedded)"] = [TS, "verify", embedded, "--key", PUB, "--require-signature"]
    for argv in commands.values():  # warm the page cache, make the signatures
        timed(argv)
    times = {name: [] for name in commands}
    for _ in range(N):
        for name, argv in commands.items():
            times[name].append(timed(argv))
    med = {name: statistics.median(t) for name, t in times.items()}
    floor = med["openssl dgst -sha256"]
    print(f"\n{label}: {model} ({size / 2**20:.0f} MiB, {len(files_of(model))} files), median of {N}")
    print(f"  {'command':28} {'seconds':>8} {'GiB/s':>7} {'x openssl':>10}")
    for name, t in med.items():
        print(f"  {name:28} {t:8.3f} {size / 2**30 / t:7.2f} {t / floor:10.2f}")
    print(f"  model_signing / tsarchive: sign {med['model_signing sign key'] / med['tsarchive sign']:.1f}x, "
          f"verify {med['model_signing verify key'] / med['tsarchive verify --key']:.1f}x")

OUT_ = os.environ["OUT"]
print(f"cores: {os.cpu_count()}, tsarchive: {TS}, model_signing: "
      + subprocess.run([MS, "-c", "import importlib.metadata as m; print(m.version('model_signing'))"],
                       capture_output=True, text=True).stdout.strip())
bench(os.environ["ARCHIVE"], "archive")
bench(os.environ["DIR"], "directory")
if failed:
    print("\nFAILED:\n  " + "\n  ".join(failed))
    sys.exit(3)
PYEOF
