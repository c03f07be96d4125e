#!/usr/bin/env bash
# bench/torch_versions.sh: the same commands on the libtorch 1.13 build (build/)
# and the libtorch 2.x build (build-torch2/, scripts/dev.sh torch2 build), side
# by side:
#   load      `tsarchive verify --load` of testdata/mlp_scripted.pt: a worker that
#             loads libtorch and the module (the fixed cost of every libtorch command)
#   run p50   per-call latency of `run --iters 200 --warmup 20` (tiny MLP, 1x8, 1 thread)
#   convnet   the same for testdata/jit/convnet.pt (1x3x32x32)
# Each number is the median of N processes (default 5). No assertions.
# Measured here (2-core machine shared with other builds, so loaded; N=3):
#   build          1.13.0   load 2.07 s   mlp p50 0.0087 ms   conv p50 0.163 ms
#   build-torch2   2.13.0   load 1.14 s   mlp p50 0.0102 ms   conv p50 0.063 ms
# libtorch 2.13's wheel loads faster than Debian's 1.13 (fewer shared libraries)
# and runs the convolution ~2.5x faster; the tiny MLP's per-call time is the same.
#   bench/torch_versions.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5}
builds=()
for b in ${BUILDS:-build build-torch2}; do
  [ -x "$b/tsarchive" ] && builds+=("$b") || echo "skipping $b: no $b/tsarchive" >&2
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
wall() {  # seconds of one command
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
p50() { "$@" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["timing"]["p50_ms"])'; }

printf '%-14s %-10s %10s %12s %12s\n' build libtorch "load s" "mlp p50 ms" "conv p50 ms"
for b in "${builds[@]}"; do
  t=$b/tsarchive
  lib=$("$t" --version | sed -n 's/^libtorch \([^ ]*\).*/\1/p')
  load=$(for _ in $(seq "$n"); do wall "$t" verify --load testdata/mlp_scripted.pt; done | median)
  mlp=$(for _ in $(seq "$n"); do p50 "$t" run testdata/mlp_scripted.pt --input 1x8 --threads 1 --warmup 20 --iters 200; done | median)
  conv=$(for _ in $(seq "$n"); do p50 "$t" run testdata/jit/convnet.pt --input 1x3x32x32 --threads 1 --warmup 20 --iters 200; done | median)
  printf '%-14s %-10s %10.3f %12.4f %12.4f\n' "$b" "$lib" "$load" "$mlp" "$conv"
done
