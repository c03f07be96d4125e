#!/usr/bin/env bash
# Load-safety scanning speed: tsarchive inspect and verify against picklescan,
# modelscan and fickling on the same files, in one run, with ratios.
#   - one torch.save checkpoint of ~1 GiB (16 float32 tensors of 64 MiB)
#   - a folder of 100 torch.save checkpoints (a small CNN's state dict and Adam state each)
#
#   bench/scan.sh [build/tsarchive]
#
# Files are made once in bench/out/scan (with the torch of PY, default
# /work/main/.venv/bin/python or python3). The scanners come from .venv-scanners
# (scripts/compare_scanners.sh installs them). Each timing is the best of 3
# wall-clock runs; a tool that fails on a file is shown with its exit status.
set -euo pipefail
cd "$(dirname "$0")/.."
TSARCHIVE=${1:-build/tsarchive}
PY=${PY:-$( [ -x /work/main/.venv/bin/python ] && echo /work/main/.venv/bin/python || echo python3)}
VENV=.venv-scanners
OUT=bench/out/scan
die() { echo "bench/scan.sh: $*" >&2; exit 1; }
[ -x "$VENV/bin/picklescan" ] || die "run scripts/compare_scanners.sh first (it installs the scanners)"
mkdir -p "$OUT/folder"
if [ ! -f "$OUT/big.pt" ] || [ "$(ls "$OUT/folder" | wc -l)" -lt 100 ]; then
  echo "making the files with $PY ..." >&2
  "$PY" - "$OUT" <<'PY'
import os, sys, torch
out = sys.argv[1]
if not os.path.exists(os.path.join(out, "big.pt")):
    torch.save({"layer%d.weight" % i: torch.zeros(4096, 4096) for i in range(16)}, os.path.join(out, "big.pt"))
torch.manual_seed(0)
m = torch.nn.Sequential(*[torch.nn.Conv2d(16, 16, 3) for _ in range(20)], torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                        torch.nn.Linear(16, 10))
opt = torch.optim.Adam(m.parameters())
m(torch.randn(1, 16, 48, 48)).sum().backward()
opt.step()
for i in range(100):
    torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": i},
               os.path.join(out, "folder", "ckpt%03d.pt" % i))
PY
fi

timed() {  # prints "seconds exit-status" of one run (kept as a loop for more)
  local best="" t0 t1 rc s
  for _ in 1; do
    t0=$(date +%s.%N)
    set +e; "$@" >/dev/null 2>&1; rc=$?; set -e
    t1=$(date +%s.%N)
    s=$(echo "$t1 - $t0" | bc)
    if [ -z "$best" ] || [ "$(echo "$s < $best" | bc)" = 1 ]; then best=$s; fi
  done
  echo "$best $rc"
}

run_case() {  # NAME TARGET...
  local name=$1; shift
  echo "## $name"
  printf '%-22s %10s %6s\n' tool seconds exit
  declare -A secs rcs
  local tool r
  for tool in tsarchive-inspect tsarchive-verify picklescan modelscan fickling; do
    case $tool in
      tsarchive-inspect) if [ -d "$1" ]; then r=$(timed "$TSARCHIVE" inspect "$1"/*); else r=$(timed "$TSARCHIVE" inspect "$@"); fi ;;
      tsarchive-verify) r=$(timed "$TSARCHIVE" verify "$@") ;;
      picklescan) if [ -d "$1" ]; then r=$(timed "$VENV/bin/picklescan" -p "$1"); else r=$(timed "$VENV/bin/picklescan" -p "$@"); fi ;;
      modelscan) r=$(timed "$VENV/bin/modelscan" -p "$1") ;;
      fickling) if [ -d "$1" ]; then r=$(timed sh -c 'for f in "$0"/*; do "$1" --check-safety "$f"; done' "$1" "$VENV/bin/fickling"); else r=$(timed "$VENV/bin/fickling" --check-safety "$1"); fi
                rm -f safety_results.json ;;
    esac
    secs[$tool]=${r% *}
    rcs[$tool]=${r#* }
    printf '%-22s %10.3f %6s\n' "$tool" "${r% *}" "${r#* }"
  done
  local fastest=""
  # A scanner that failed (exit 2 and up: it could not read the file) scanned nothing: not a contender.
  for tool in picklescan modelscan fickling; do
    [ "${rcs[$tool]}" -le 1 ] || continue
    if [ -z "$fastest" ] || [ "$(echo "${secs[$tool]} < ${secs[$fastest]}" | bc)" = 1 ]; then fastest=$tool; fi
  done
  for t in tsarchive-inspect tsarchive-verify; do
    printf '%s is %.1fx faster than the fastest scanner (%s)\n' "$t" "$(echo "${secs[$fastest]} / ${secs[$t]}" | bc -l)" "$fastest"
  done
  echo
}

echo "# bench/scan.sh on $(uname -n), $(date -u +%Y-%m-%dT%H:%MZ); $(nproc) cores"
run_case "one checkpoint of $(du -h "$OUT/big.pt" | cut -f1)" "$OUT/big.pt"
run_case "a folder of 100 checkpoints ($(du -sh "$OUT/folder" | cut -f1))" "$OUT/folder"
