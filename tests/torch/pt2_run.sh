#!/usr/bin/env bash
# `run` on an AOTInductor package (.pt2) with the libtorch this build links:
# libtorch 1.x (Debian's 1.13) has no AOTInductor, so the run is refused with
# one clear line and exit 5, after the core's checks; libtorch 2.x runs it,
# replays a golden it saved, records a check in a copy and replays that. The
# outputs are compared with Python's aoti_load_package in
# tests/pytorch/check_pt2_run.py.
#   pt2_run.sh TSARCHIVE TESTDATA LIBTORCH_VERSION
set -u
bin=$1 testdata=$2 libtorch=$3
pkg=$testdata/pt2/mlp_dynamic_aoti.pt2
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" run "$pkg" --input 5x4 >"$tmp/out" 2>"$tmp/err"
status=$?
if [[ $libtorch == 1.* ]]; then
  [ "$status" -eq 5 ] || fail "libtorch $libtorch: exit $status, wanted 5: $(cat "$tmp/err")"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "wanted one error line: $(cat "$tmp/err")"
  grep -q "^tsarchive: error: running a .pt2 (an AOTInductor package) needs tsarchive built against libtorch 2.x; this one links libtorch 1\." "$tmp/err" ||
    fail "unclear refusal: $(cat "$tmp/err")"
  [ -s "$tmp/out" ] && fail "wrote to stdout: $(cat "$tmp/out")"
  # The core's refusals come first, the same with any libtorch.
  "$bin" run "$testdata/pt2/mlp_dynamic.pt2" --input 2x4 2>"$tmp/err"
  [ $? -eq 3 ] || fail "a program without compiled artifacts: wanted exit 3: $(cat "$tmp/err")"
  echo "libtorch $libtorch: run of a .pt2 refused with exit 5"
  exit 0
fi
[ "$status" -eq 0 ] || fail "libtorch $libtorch: exit $status: $(cat "$tmp/err")"
grep -q "AOTInductor model 'model'" "$tmp/out" || fail "no AOTInductor schema line: $(cat "$tmp/out")"
grep -q "float32 \[5, 3\]" "$tmp/out" || fail "no [5, 3] output: $(cat "$tmp/out")"
"$bin" run "$pkg" --input 5x4 --seed 1 --save-inputs "$tmp/in.pt" --save-outputs "$tmp/out.pt" >/dev/null 2>"$tmp/err" ||
  fail "--save-outputs: $(cat "$tmp/err")"
"$bin" run "$pkg" --input "@$tmp/in.pt" --expect "@$tmp/out.pt" --iters 3 >/dev/null 2>"$tmp/err" ||
  fail "--expect: $(cat "$tmp/err")"
cp "$pkg" "$tmp/p.pt2"
"$bin" run "$tmp/p.pt2" --input 5x4 --record >"$tmp/out" 2>"$tmp/err" || fail "--record: $(cat "$tmp/err")"
grep -q "extra/tsarchive/check_outputs.pt.b64" "$tmp/out" || fail "no record note: $(cat "$tmp/out")"
"$bin" run "$tmp/p.pt2" --check >/dev/null 2>"$tmp/err" || fail "--check: $(cat "$tmp/err")"
echo "libtorch $libtorch: ran $pkg, replayed its saved golden and its recorded check"
