#!/usr/bin/env bash
# libtorch runs in a worker process (src/worker/worker.h). With --no-validate the
# hostile archives that crash or exhaust libtorch 1.13 reach it, and tsarchive
# must report each as one error line, exit 5, write nothing and leave no
# process behind: renamed __parameters__/__buffers__ (SIGSEGV in
# torch::jit::load), a data.pkl length that makes libtorch allocate ~17 GB
# (--memory-limit), a run longer than --time-limit, a parent killed while its
# worker runs.
#   worker_isolation.sh TSARCHIVE TESTDATA_DIR
set -uo pipefail
tsarchive=$1 testdata=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }
ulimit -c unlimited 2>/dev/null  # a core dump would show up here: the worker must turn them off
checked=0

# expect_stopped CODE PATTERN -- ARGS...: exit CODE, one error line matching
# PATTERN, nothing written next to out.pt, no core file.
expect_stopped() {
  local want=$1 pattern=$2
  shift 3
  local started=$SECONDS
  "$tsarchive" "$@" >stdout 2>stderr
  local status=$?
  [ "$status" = "$want" ] || fail "exit $status, want $want: $* ($(cat stderr))"
  [ "$(grep -c '^tsarchive: error: ' stderr)" = 1 ] || fail "want one error line: $* ($(cat stderr))"
  grep -v '^tsarchive: \(error\|note\): ' stderr && fail "other output on stderr: $*"
  grep -q -- "$pattern" stderr || fail "no '$pattern' in: $(cat stderr)"
  [ -z "$(ls -A | grep -v '^std\(out\|err\)$')" ] || fail "left behind: $(ls -A) after: $*"
  (( SECONDS - started < 60 )) || fail "took $((SECONDS - started)) s: $*"
  checked=$((checked + 1))
}

# libtorch 1.x SEGFAULTs on a renamed __parameters__/__buffers__ list; 2.x
# refuses it with an exception ("Expected a type to present for class
# constant"): one error line, exit 5, either way.
if "$tsarchive" --version | grep -q '^libtorch 1\.'; then
  crash() { echo "libtorch crashed with SIGSEGV (Segmentation fault) while $1"; }
else
  crash() { echo "libtorch could not"; }
fi
for f in renamed_parameters renamed_buffers; do
  a=$testdata/hostile/$f.pt
  expect_stopped 5 "$(crash "")" -- run "$a" --input 2x8 --no-validate
  if [ "$(crash x)" != "libtorch could not" ]; then
    grep -q "not checked (--no-validate)" stderr || fail "the message does not say the archive was not checked"
  fi
  grep -q "($a)" stderr || fail "the message does not name the file"
  expect_stopped 5 "$(crash "reading the graph")" -- inspect --graph "$a" --no-validate
  expect_stopped 5 "$(crash "listing the operators")" -- inspect --ops "$a" --no-validate
  expect_stopped 5 "$(crash "converting")" -- convert "$a" --input 2x8 --freeze -o out.pt --no-validate
  expect_stopped 5 "$(crash "tracing")" -- trace "$a" --input 2x8 -o out.pt --no-validate
  # Without --no-validate the gate refuses them before libtorch.
  expect_stopped 3 "which TorchScript never writes" -- run "$a" --input 2x8
done

# ~17 GB requested by one lying length in data.pkl: stopped at the limit.
expect_stopped 5 "libtorch passed the memory limit (512 MiB resident, --memory-limit) while running forward" -- \
  run "$testdata/hostile/pkl_lying_length.pt" --input 2x8 --no-validate --memory-limit 512M
# The limit holds for valid archives too, and stamp leaves the file as it was.
cp "$testdata/mlp_scripted.pt" model.pt
before=$(sha256sum < model.pt)
"$tsarchive" stamp model.pt --memory-limit 1M >stdout 2>stderr && fail "stamp passed a 1 MiB limit"
grep -q "memory limit (1.00 MiB resident, --memory-limit) while re-saving the module" stderr ||
  fail "stamp: $(cat stderr)"
[ "$(sha256sum < model.pt)" = "$before" ] || fail "a stopped stamp changed the archive"
[ "$(ls -A | sort | tr '\n' ' ')" = "model.pt stderr stdout " ] || fail "stamp left: $(ls -A)"
rm model.pt
checked=$((checked + 1))

# Time: a real model timed for 10^8 calls, stopped after 1 s.
expect_stopped 5 "within the time limit (1 s, --time-limit) while running forward" -- \
  run "$testdata/mlp_scripted.pt" --input 2x8 --iters 100000000 --time-limit 1
# Loading libtorch alone (287 libraries) takes 0.3-0.7 s here; 0.05 s stops any load.
expect_stopped 5 "within the time limit (0.05 s, --time-limit) while loading the module" -- \
  verify --load "$testdata/mlp_scripted.pt" --time-limit 0.05

# Bad limits are usage errors.
expect_stopped 2 "--memory-limit 12Q is not a size" -- run "$testdata/mlp_scripted.pt" --input 2x8 --memory-limit 12Q
expect_stopped 2 "time-limit" -- run "$testdata/mlp_scripted.pt" --input 2x8 --time-limit -1

# The parent killed (kill -9, no chance to clean up): its worker goes too.
"$tsarchive" run "$testdata/mlp_scripted.pt" --input 2x8 --iters 100000000 --time-limit 0 >/dev/null 2>&1 &
parent=$!
worker=
for _ in $(seq 1 100); do
  worker=$(pgrep -P "$parent" | head -1)
  [ -n "$worker" ] && break
  sleep 0.05
done
[ -n "$worker" ] || fail "no worker process under tsarchive run"
kill -9 "$parent"
wait "$parent" 2>/dev/null
for _ in $(seq 1 40); do
  kill -0 "$worker" 2>/dev/null || break
  sleep 0.05
done
kill -0 "$worker" 2>/dev/null && { kill -9 "$worker"; fail "the worker outlived its parent"; }
checked=$((checked + 1))

# In the worker and in-process (TSARCHIVE_IN_PROCESS=1), the same answer.
for mode in 0 1; do
  TSARCHIVE_IN_PROCESS=$mode "$tsarchive" run "$testdata/mlp_scripted.pt" --input 2x8 \
    --expect "@$testdata/run/mlp_out_seed0.pt" --save-outputs "out$mode.npy" >/dev/null 2>stderr ||
    fail "TSARCHIVE_IN_PROCESS=$mode: $(cat stderr)"
done
cmp -s out0.npy out1.npy || fail "the worker's saved outputs differ from the in-process ones"
checked=$((checked + 1))

echo "ok: $checked isolation cases (SIGSEGV, memory and time limits, killed parent, in-process parity)"
