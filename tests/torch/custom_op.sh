#!/usr/bin/env bash
# A model that calls a custom operator runs only with the operator's library
# loaded: `tsarchive run --load-library LIB.so`.
#   custom_op.sh TSARCHIVE SOURCE_DIR
# Builds tests/torch/custom_op (tsarchive_test::add_one, x + 1) against the
# system libtorch, has Python's torch load it and script a model that calls
# it ((add_one(x)) * 2), then checks that tsarchive run:
#   - without the library fails to load the model: exit 5 (libtorch failed),
#     and the message names the operator and points at --load-library;
#   - with --load-library runs it, and its output equals Python's (--expect);
#   - with a library that does not exist fails: exit 5, one line naming it.
# Exit 77 (skipped) when Debian's python3 has no torch (it makes the model).
set -euo pipefail
tsarchive=$1 src=$2
PY=${PY:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $PY has no torch (apt-get install python3-torch); it makes the model"
  exit 77
fi

# The libtorch tsarchive links (TSARCHIVE_TORCH_ROOT, set by CTest), else the system's.
cmake -S "$src/tests/torch/custom_op" -B "$work/ops" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      ${TSARCHIVE_TORCH_ROOT:+-DCMAKE_PREFIX_PATH="$TSARCHIVE_TORCH_ROOT"} \
      ${TSARCHIVE_TORCH_CMAKE_ARGS:-} >/dev/null
cmake --build "$work/ops" -j2 >/dev/null
lib=$work/ops/libtsarchive_test_ops.so
[[ -f $lib ]] || { echo "FAIL: the op library was not built at $lib" >&2; exit 1; }

# TorchScript compiles from source, so the module lives in a real file.
cat >"$work/make_model.py" <<'EOF'
import sys

import torch

torch.ops.load_library(sys.argv[1])


class AddOneTwice(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.tsarchive_test.add_one(x) * 2.0


m = torch.jit.script(AddOneTwice())
m.save(sys.argv[2])
# What `tsarchive run --input 2x3 --seed 0` gives the model.
torch.manual_seed(0)
x = torch.randn(2, 3)
y = m(x)
assert torch.equal(y, (x + 1) * 2), "the op does not compute x + 1"
torch.save(y, sys.argv[3])
EOF
"$PY" "$work/make_model.py" "$lib" "$work/model.pt" "$work/golden.pt"

fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# run_case WANT_RC NAME ARGS...: runs tsarchive run, keeps stdout/stderr in
# $work/NAME.{out,err}, checks the exit code.
run_case() {
  local want=$1 name=$2 rc=0
  shift 2
  "$tsarchive" run "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  echo "== $name: tsarchive run $* -> exit $rc"
  sed 's/^/   stderr: /' "$work/$name.err" | head -20
  [[ $rc == "$want" ]] || fail "$name: exit $rc, want $want"
}

# 1. Without the library: the archive cannot be loaded.
run_case 5 no_lib "$work/model.pt" --input 2x3
grep -qF 'tsarchive_test::add_one' "$work/no_lib.err" || fail "no_lib: the message does not name tsarchive_test::add_one"
grep -qF -- '--load-library' "$work/no_lib.err" || fail "no_lib: the message does not suggest --load-library"

# 2. With it: runs, and matches Python's output for the same seeded input.
run_case 0 with_lib "$work/model.pt" --load-library "$lib" --input 2x3 --seed 0
run_case 0 with_lib_expect "$work/model.pt" --load-library "$lib" --input 2x3 --seed 0 --expect "@$work/golden.pt"

# 3. A library that is not there: exit 5, one line that names it.
run_case 5 missing_lib "$work/model.pt" --load-library /nonexistent.so --input 2x3
lines=$(wc -l <"$work/missing_lib.err")
[[ $lines == 1 ]] || fail "missing_lib: $lines lines on stderr, want one"
grep -qF '/nonexistent.so' "$work/missing_lib.err" || fail "missing_lib: the message does not name /nonexistent.so"

# 4. Every command that loads libtorch takes --load-library: without
#    it each fails naming the operator; with it each succeeds.
cmd_case() {
  local want=$1 name=$2 rc=0
  shift 2
  "$tsarchive" "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  echo "== $name: tsarchive $* -> exit $rc"
  sed 's/^/   stderr: /' "$work/$name.err" | head -5
  [[ $rc == "$want" ]] || fail "$name: exit $rc, want $want"
}
cp "$work/model.pt" "$work/stamp_me.pt"
# Without the library the verdict stops first: code calls a namespace outside libtorch (exit 8),
# and the hint names --load-library; accepted by name, the load itself fails (exit 5).
cmd_case 8 verify_no_lib_verdict verify "$work/model.pt"
grep -qF -- '--load-library' "$work/verify_no_lib_verdict.err" || fail "verify without the library: no --load-library hint"
grep -qF -- "namespace 'tsarchive_test'" "$work/verify_no_lib_verdict.err" || fail "verify without the library: the namespace is not named"
cmd_case 5 verify_no_lib verify --load --allow-global torch.ops.tsarchive_test "$work/model.pt"
grep -qF -- '--load-library' "$work/verify_no_lib.err" || fail "verify --load without the library: no --load-library hint"
# verify --load names the user's path, as every other command does, in text and in --json's "file".
grep -qF "$work/model.pt" "$work/verify_no_lib.err" || fail "verify --load does not name $work/model.pt"
grep -qF '/proc/self/fd' "$work/verify_no_lib.err" && fail "verify --load's error names /proc/self/fd"
cmd_case 5 verify_no_lib_json verify --load --json --allow-global torch.ops.tsarchive_test "$work/model.pt"
grep -qF "\"file\": \"$work/model.pt\"" "$work/verify_no_lib_json.out" "$work/verify_no_lib_json.err" ||
  fail "verify --load --json: \"file\" is not $work/model.pt"
grep -qF '/proc/self/fd' "$work/verify_no_lib_json.out" "$work/verify_no_lib_json.err" && fail "verify --load --json names /proc/self/fd"
cmd_case 0 verify_lib verify --load "$work/model.pt" --load-library "$lib"
cmd_case 0 ops_lib inspect --ops "$work/model.pt" --load-library "$lib"
grep -qF 'tsarchive_test::add_one' "$work/ops_lib.out" || fail "inspect --ops does not list tsarchive_test::add_one"
cmd_case 0 graph_lib inspect --graph "$work/model.pt" --load-library "$lib"
cmd_case 0 stamp_lib stamp "$work/stamp_me.pt" --load-library "$lib" --no-git --no-host
cmd_case 5 stamp_no_lib stamp "$work/stamp_me.pt" --no-git --no-host
grep -qF "$work/stamp_me.pt" "$work/stamp_no_lib.err" || fail "stamp names the user's path, not /proc/self/fd"
grep -qF '/proc/self/fd' "$work/stamp_no_lib.err" && fail "stamp's error names /proc/self/fd"
cmd_case 0 convert_lib convert "$work/model.pt" --input 2x3 --freeze -o "$work/frozen.pt" --load-library "$lib"
cmd_case 0 trace_lib trace "$work/model.pt" --input 2x3 -o "$work/traced.pt" --load-library "$lib"

if ((fails)); then
  echo "$fails check(s) failed" >&2
  exit 1
fi
echo "ok: without the library exit 5 naming the operator and --load-library; with it the output equals Python's; a missing library is one line, exit 5"
