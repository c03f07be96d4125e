#!/usr/bin/env bash
# bench/jit.sh: what `tsarchive convert` and `inspect --ops` cost next to the
# Python a user would otherwise write, side by side in one run (whole
# processes, as a CI step pays them).
#
#   freeze   tsarchive convert M --input S --freeze -o OUT.pt
#            (load, run, freeze, save with the stamp, reload, run, compare, digest, rename)
#            vs python3: torch.jit.load; m(x); torch.jit.freeze; save; torch.jit.load; allclose
#   mobile   tsarchive convert M --input S --mobile -o OUT.ptl
#            vs python3: optimize_for_mobile; _save_for_lite_interpreter;
#            _load_for_lite_interpreter; allclose
#   ops      tsarchive inspect M --ops  vs  python3: torch.jit.export_opnames(torch.jit.load(M))
#
# Model: testdata/jit/convnet.pt (input 1x3x32x32). Commands are interleaved
# round-robin; each number is the median wall time over N processes. No
# target and no assertions: read the ratios.
# Environment: TSARCHIVE (default build/tsarchive), N (default 5), PY
# (default /usr/bin/python3, with torch). Exit: 0 measured, 2 setup error.
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
N=${N:-5}
PY=${PY:-/usr/bin/python3}
TSARCHIVE=${TSARCHIVE:-$PWD/build/tsarchive}
MODEL=testdata/jit/convnet.pt
SPEC=1x3x32x32
die() { echo "bench/jit.sh: setup error: $*" >&2; exit 2; }
[[ -x $PY ]] && "$PY" -c 'import torch' 2>/dev/null || die "$PY with torch is needed (the Python side)"
[[ -x $TSARCHIVE ]] || die "no $TSARCHIVE: build first (scripts/dev.sh build)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

PY_FREEZE="import torch
torch.manual_seed(0); x = torch.randn(1, 3, 32, 32)
with torch.no_grad():
    m = torch.jit.load('$MODEL').eval(); y = m(x)
    torch.jit.freeze(m).save('$TMP/py.pt')
    assert torch.allclose(torch.jit.load('$TMP/py.pt')(x), y, atol=1e-5, rtol=1e-3)"
PY_MOBILE="import torch
from torch.utils.mobile_optimizer import optimize_for_mobile
from torch.jit.mobile import _load_for_lite_interpreter
torch.manual_seed(0); x = torch.randn(1, 3, 32, 32)
with torch.no_grad():
    m = torch.jit.load('$MODEL').eval(); y = m(x)
    optimize_for_mobile(m)._save_for_lite_interpreter('$TMP/py.ptl')
    assert torch.allclose(_load_for_lite_interpreter('$TMP/py.ptl')(x), y, atol=1e-5, rtol=1e-3)"
PY_OPS="import torch; torch.jit.export_opnames(torch.jit.load('$MODEL'))"

declare -A CMD=(
  [freeze_ts]="$TSARCHIVE convert $MODEL --input $SPEC --freeze -o $TMP/ts.pt"
  [freeze_py]="$PY -c \"\$PY_FREEZE\""
  [mobile_ts]="$TSARCHIVE convert $MODEL --input $SPEC --mobile -o $TMP/ts.ptl"
  [mobile_py]="$PY -c \"\$PY_MOBILE\""
  [ops_ts]="$TSARCHIVE inspect $MODEL --ops"
  [ops_py]="$PY -c \"\$PY_OPS\""
)
ORDER=(freeze_ts freeze_py mobile_ts mobile_py ops_ts ops_py)
declare -A TIMES
for ((i = 0; i < N; i++)); do
  for k in "${ORDER[@]}"; do
    t0=$(date +%s.%N)
    eval "${CMD[$k]}" >/dev/null 2>&1 || { echo "bench/jit.sh: failed: $k" >&2; exit 3; }
    t1=$(date +%s.%N)
    TIMES[$k]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') "
  done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-8s %12s %12s %8s\n' task "tsarchive s" "python s" ratio
for task in freeze mobile ops; do
  ts=$(median "${TIMES[${task}_ts]}")
  py=$(median "${TIMES[${task}_py]}")
  printf '%-8s %12.3f %12.3f %7.2fx\n' "$task" "$ts" "$py" "$(awk -v a="$ts" -v b="$py" 'BEGIN { print a / b }')"
done
echo "(median of $N processes each; ratio = tsarchive / python; model $MODEL)"
