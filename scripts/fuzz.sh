#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang in build-fuzz/ and runs
# each for SECONDS (default 60), one after another, from a seed corpus made of
# testdata/ (archives, .pt2 included, for zip_layer, inspect_path and zip_structure, which also
# reads its input as mutations of a built-in archive; the pickles inside them
# for pickle_reader; the extra/ files inside them and testdata's JSON files
# for json_text; testdata/images for image; a few CBOR replies for worker_reply; model signatures made here for signature_bundle). Prints executions and crashes per target; copies every
# crash, timeout, leak or OOM input to testdata/fuzz-crashes/<target>-<name>,
# where CTest's fuzz.replay replays it in the normal build. Exit 1 if any.
#
#   scripts/fuzz.sh [SECONDS]        (from anywhere)
# Installs the Debian packages it needs: clang, and libclang-rt-14-dev, which
# holds libclang_rt.fuzzer-x86_64.a (`dpkg -S libclang_rt.fuzzer`).
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/debian.sh"
install_packages cmake ninja-build clang libclang-rt-14-dev g++ pkg-config libzip-dev zlib1g-dev libssl-dev libstb-dev libjpeg-dev \
  nlohmann-json3-dev libcli11-dev python3
build=${TSARCHIVE_FUZZ_BUILD:-$root/build-fuzz}
targets=(zip_layer pickle_reader inspect_path zip_structure json_text image signature_bundle sigstore_trust_root load_safety worker_reply)

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=${CXX_FUZZ:-clang++} -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTSARCHIVE_FUZZ=ON >/dev/null
# Quiet when it builds; the compiler's words when it does not (ninja prints them on stdout).
if ! ninja -C "$build" -j"${JOBS:-2}" "${targets[@]/#/fuzz_}" >"$build/ninja.log" 2>&1; then
  tail -n 60 "$build/ninja.log"
  echo "scripts/fuzz.sh: the fuzz targets did not build (whole log: $build/ninja.log)" >&2
  exit 1
fi

# Seeds: copied into the working corpus, which libFuzzer grows in place.
seeds=$build/seeds
rm -rf "$seeds"
mkdir -p "$seeds/archives" "$seeds/pickles" "$seeds/json" "$seeds/images" "$seeds/signatures" "$seeds/loadsafety"
find "$root/testdata" -maxdepth 2 -type f \( -name '*.pt' -o -name '*.ptl' -o -name '*.pt2' -o -name '*.pth' -o -name '*.bin' \
  -o -name '*.zip' -o -name '*.onnx' \) -exec cp {} "$seeds/archives/" \;
python3 - "$root/testdata" "$seeds/pickles" "$seeds/json" <<'PY'
import os, sys, zipfile
src, out, json_out = sys.argv[1:]
for name in sorted(os.listdir(src)):
    path = os.path.join(src, name)
    if not zipfile.is_zipfile(path):
        continue
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                to = None
                if info.filename.endswith(".pkl"):
                    to = out
                elif "/extra/" in info.filename and info.file_size <= 65536:
                    to = json_out
                if to:
                    with open(os.path.join(to, "%s-%s" % (name, info.filename.replace("/", "_"))), "wb") as f:
                        f.write(z.read(info))
    except Exception:
        pass
PY
find "$root/testdata" -maxdepth 2 -type f -name '*.json' -size -64k -exec cp {} "$seeds/json/" \;
cp "$root/testdata/legacy_state_dict.pth" "$seeds/pickles/"
# The load-safety corpus (pickles and archives, hostile and benign) for load_safety.
find "$root/testdata/loadsafety" -type f -size -128k -exec sh -c 'cp "$1" "$2/$(echo "${1#$3/}" | tr / _)"' _ {} \
  "$seeds/loadsafety" "$root/testdata/loadsafety" \;
# Pictures (testdata/images, its hostile ones too) and the labels files.
find "$root/testdata/images" -type f \( -name '*.png' -o -name '*.jpg' -o -name '*.bmp' -o -name '*.txt' \) \
  -exec sh -c 'cp "$1" "$2/$(echo "${1#$3/}" | tr / _)"' _ {} "$seeds/images" "$root/testdata/images" \;

# Worker replies (CBOR, as worker_codec.h's to_cbor writes them): a result
# map, arrays, strings, byte strings, floats, a nested error.
mkdir -p "$seeds/cbor"
printf '\xa2\x62ok\xf5\x66result\x83\x01\x20\xfb\x3f\xf0\x00\x00\x00\x00\x00\x00' >"$seeds/cbor/result"
printf '\xa1\x65error\xa2\x64kind\x05\x64text\x64oops' >"$seeds/cbor/error"
printf '\x82\x43abc\x81\x81\x81\xa0' >"$seeds/cbor/nested"

# Sigstore keyless material: the trust roots and bundles of testdata/sigstore (fake and production).
mkdir -p "$seeds/sigstore"
find "$root/testdata/sigstore" -type f \( -name '*.json' -o -name '*.sigstore' \) \
  -exec sh -c 'cp "$1" "$2/$(echo "${1#$3/}" | tr / _)"' _ {} "$seeds/sigstore" "$root/testdata/sigstore" \;

# Model signatures (core/provenance/model_signature.h): bundles of the key and certificate
# methods over v1.0 and v0.1 statements (the signatures' bytes are random: the
# parser does not verify them).
python3 - "$seeds/signatures" <<'PY'
import base64, json, os, sys
def b64(b): return base64.b64encode(b).decode()
res = [{"name": n, "algorithm": "sha256", "digest": "%064x" % i} for i, n in enumerate(["a.bin", "d/b.json", "."])]
v1 = {"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": "m", "digest": {"sha256": "0" * 64}}],
      "predicateType": "https://model_signing/signature/v1.0",
      "predicate": {"serialization": {"method": "files", "hash_type": "sha256", "allow_symlinks": False,
                                      "ignore_paths": [".git", "model.sig"]}, "resources": res[:2]}}
v01 = {"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://model_signing/Digests/v0.1",
       "subject": [{"name": r["name"], "digest": {"sha256": r["digest"]}} for r in res[:2]], "predicate": {}}
for i, (statement, material) in enumerate([(v1, {"publicKey": {"hint": "ab" * 32}}), (v01, {"publicKey": {}}),
                                          (v1, {"x509CertificateChain": {"certificates": [{"rawBytes": b64(os.urandom(300))}]}})]):
    bundle = {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
              "verificationMaterial": dict(material, tlogEntries=[]),
              "dsseEnvelope": {"payload": b64(json.dumps(statement, indent=2).encode()),
                               "payloadType": "application/vnd.in-toto+json",
                               "signatures": [{"sig": b64(os.urandom(70)), "keyid": ""}]}}
    with open(os.path.join(sys.argv[1], "seed%d.sig" % i), "w") as f:
        json.dump(bundle, f)
PY

status=0
summary=()
details=()
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t artifacts=$build/artifacts/$t/
  mkdir -p "$corpus" "$artifacts"
  rm -f "$artifacts"*
  seed_dir=$seeds/archives
  [ "$t" = pickle_reader ] && seed_dir=$seeds/pickles
  [ "$t" = load_safety ] && seed_dir=$seeds/loadsafety
  [ "$t" = json_text ] && seed_dir=$seeds/json
  [ "$t" = image ] && seed_dir=$seeds/images
  [ "$t" = signature_bundle ] && seed_dir=$seeds/signatures
  [ "$t" = sigstore_trust_root ] && seed_dir=$seeds/sigstore
  [ "$t" = worker_reply ] && seed_dir=$seeds/cbor
  cp "$seed_dir/"* "$corpus/"
  log=$build/$t.log
  # -fork keeps going after a crash; each crash leaves a file in $artifacts.
  # -timeout is wall time per input and must leave room for bounded but heavy
  # inputs on a busy machine: the seed testdata/hostile/pkl_deep_nesting.pt
  # (a million nested lists) needs ~3 s of CPU under ASan and took 21 s of wall
  # time on a loaded 2-core machine, where -timeout=10 reported it as a hang.
  # -report_slow_units: libFuzzer saves any input slower than 10 s as a
  # "slow-unit" artifact; on a loaded machine bounded inputs get there (a 20 MB
  # pickle refused at 4 million values took 12 s under ASan), so only inputs
  # near the hang timeout are kept, and those count as finds.
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=60 -report_slow_units=50 -rss_limit_mb=2048 \
    -max_len=131072 \
    -print_final_stats=1 -artifact_prefix="$artifacts" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -fork=1 "$corpus" >"$log" 2>&1 || true
  # -fork prints progress lines "#<executions>: cov: ..." and no final stats.
  execs=$(grep -Eo '^#[0-9]+' "$log" | tr -d '#' | sort -n | tail -1 || true)
  crashes=0
  for f in "$artifacts"*; do
    [ -f "$f" ] || continue
    crashes=$((crashes + 1))
    cp "$f" "$root/testdata/fuzz-crashes/$t-$(basename "$f")"
  done
  if [ "$crashes" -gt 0 ]; then
    # What the sanitizer or libFuzzer said, and each input (up to 64 KiB) as
    # base64, so that a CI log alone is enough to reproduce the find.
    details+=("== $t: $crashes find(s); from $log:")
    # Under -fork the parent echoes only a crashing child's "ERROR:" and "runtime error:"
    # lines, and nothing for a timeout or OOM: the last progress line counts those. The
    # grep may find nothing, which must not end the script under `set -e` (a UBSan
    # "runtime error:" find once stopped it here without a word).
    details+=("$({ grep -E 'ERROR: |runtime error: |SUMMARY: |Test unit written|slow-unit|deadly signal|out-of-memory' "$log" \
      | sort | uniq -c | sort -rn | head -20; grep -E '^#[0-9]+: .*oom/timeout/crash' "$log" | tail -n 1; } || true)")
    for f in "$artifacts"*; do
      [ -f "$f" ] || continue
      if [ "$(stat -c %s "$f")" -le 65536 ]; then
        details+=("$(basename "$f") ($(stat -c %s "$f") bytes) base64: $(base64 -w0 "$f")")
      else
        details+=("$(basename "$f") ($(stat -c %s "$f") bytes): too big to print")
      fi
    done
  fi
  [ "$crashes" -eq 0 ] || status=1
  summary+=("$(printf '%-14s %4ss  seeds %4d  executions %10s  crashes %d  corpus %d  (log %s)' "$t" "$seconds" \
    "$(ls "$seed_dir" | wc -l)" "${execs:-?}" "$crashes" "$(ls "$corpus" | wc -l)" "$log")")
done
printf '%s\n' "${summary[@]}"
[ "${#details[@]}" -eq 0 ] || printf '%s\n' "${details[@]}"
[ "$status" -eq 0 ] || echo "crash inputs copied to testdata/fuzz-crashes/: fix them; CTest fuzz.replay replays them"
exit $status
