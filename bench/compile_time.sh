#!/usr/bin/env bash
# CPU seconds to compile every translation unit of a configured build folder,
# with ccache off, one unit at a time: the cost of a clean build (summed per
# layer) and of a one-file rebuild (the heaviest units). CPU time rather than
# wall time, so that a busy machine changes the numbers little.
#
#   bench/compile_time.sh [BUILD_DIR] [TARGET...]    (default: build, all targets)
set -euo pipefail
build=${1:-build}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(all)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
results=$out/results
: >"$results"
# ninja -t commands prints every command the targets need, in build order;
# keep the compiles (those with -c) and drop the launcher.
ninja -C "$build" -t commands "${targets[@]}" | grep -E ' -c [^ ]+\.cc' | sort -u | while read -r line; do
  src=$(grep -oE ' -c [^ ]+\.cc' <<<"$line" | sed 's/^ -c //')
  cmd=${line#ccache }
  cmd=$(sed -E 's/ -o [^ ]+/ -o '"${out//\//\\/}"'\/unit.o/; s/ -MD -MT [^ ]+ -MF [^ ]+//' <<<"$cmd")
  t=$( { /usr/bin/time -f '%U %S' bash -c "cd '$build' && $cmd" >/dev/null 2>"$out/err"; } 2>&1 | tail -1 || true)
  if ! grep -qE '^[0-9.]+ [0-9.]+$' <<<"$t"; then t=$(tail -1 "$out/err"); fi
  cpu=$(awk '{printf "%.1f", $1 + $2}' <<<"$t")
  printf '%s %s\n' "$cpu" "${src#$PWD/}" >>"$results"
done
echo "CPU seconds per translation unit (ccache off), $build:"
sort -rn "$results" | head -8 | awk '{printf "  %6.1f  %s\n", $1, $2}'
echo "by folder:"
awk '{ n = split($2, p, "/"); d = (n > 1) ? p[n-1] : "."; if ($2 ~ /^tests\//) d = "tests/" p[2]; s[d] += $1; c[d]++ }
     END { for (d in s) printf "  %6.1f s  %3d units  %s\n", s[d], c[d], d }' "$results" | sort -rn
awk '{ s += $1; n++ } END { printf "total: %.1f CPU seconds in %d units (a clean build at -j2 takes about half in wall time)\n", s, n }' "$results"
