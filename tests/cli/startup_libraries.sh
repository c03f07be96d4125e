#!/usr/bin/env bash
# What the binary loads before main(), and when it loads the rest: libzip and
# libcrypto are dlopen()ed at first use (base/runtime_library.h), so --version,
# help and a usage error load neither, inspect loads libzip only, verify both,
# sign both for a model file (it checks it as verify does) and libcrypto only
# for a file that is no model (never libtorch).
# Usage: startup_libraries.sh TSARCHIVE TESTDATA
set -euo pipefail
t=$1
testdata=$2
fail() { echo "FAIL: $*" >&2; exit 1; }

loaded() {  # the shared libraries a command line opens, one file name a line
  LD_DEBUG=files "$@" 2>&1 >/dev/null | sed -n 's/.*file=\([^ ]*\) \[0\];  *\(needed\|dynamically loaded\) by.*/\1/p' | sort -u
}

needed=$(readelf -d "$t" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for lib in libzip libcrypto; do
  if grep -q "^$lib" <<<"$needed"; then fail "the binary needs $lib at start-up: $(tr '\n' ' ' <<<"$needed")"; fi
done

for args in "--version" "help inspect" "inspect --no-such-flag"; do
  libs=$(loaded "$t" $args || true)
  grep -q '^libzip' <<<"$libs" && fail "'tsarchive $args' loads libzip"
  grep -q '^libcrypto' <<<"$libs" && fail "'tsarchive $args' loads libcrypto"
done

libs=$(loaded "$t" inspect "$testdata/mlp_scripted.pt")
grep -q '^libzip' <<<"$libs" || fail "inspect did not load libzip (the cross-check must run): $libs"
libs=$(loaded "$t" verify "$testdata/mlp_scripted.pt" || true)
grep -q '^libcrypto' <<<"$libs" || fail "verify did not load libcrypto: $libs"
# sign checks a model file as verify does, then hashes and signs it: never libtorch.
keys=$(mktemp -d)
trap 'rm -rf "$keys"' EXIT
openssl ecparam -name prime256v1 -genkey -noout -out "$keys/k.pem" 2>/dev/null
libs=$(loaded "$t" sign "$testdata/mlp_scripted.pt" --key "$keys/k.pem" -o "$keys/m.sig" || true)
grep -q '^libcrypto' <<<"$libs" || fail "sign did not load libcrypto: $libs"
grep -Eq '^lib(torch|c10|tsarchive_torch)' <<<"$libs" && fail "sign loads libtorch: $libs"
grep -q '^libzip' <<<"$libs" || fail "sign did not check the archive (no libzip): $libs"
# A file that is no model is signed as bytes: libcrypto alone.
libs=$(loaded "$t" sign "$testdata/model.onnx" --key "$keys/k.pem" -o "$keys/o.sig" || true)
grep -q '^libcrypto' <<<"$libs" || fail "sign of an ONNX file did not load libcrypto: $libs"
grep -q '^libzip' <<<"$libs" && fail "sign of an ONNX file loads libzip: $libs"
echo "ok: start-up needs $(tr '\n' ' ' <<<"$needed")"
