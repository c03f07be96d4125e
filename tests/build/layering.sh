#!/usr/bin/env bash
# The layers of ARCHITECTURE.md hold: a layer sees its own headers and those of
# the layers below it, and an #include of any other layer does not compile.
# For every pair of layers, compiles a one-line file that includes a header of
# the other layer with exactly the include folders the build gives the first
# one (BUILD/layers/<name>, a link to src/<name>), and expects success for the
# layers below and failure for the ones above; then checks that no source file
# spells an include of a layer it may not see (the build would fail anyway;
# this names the line).
#   layering.sh CXX SOURCE_DIR BUILD_DIR
set -uo pipefail
cxx=$1 src=$2 build=$3
declare -A below=(
  [base]="base"
  [format]="base format"
  [contract]="base contract"
  [core]="base format contract core"
  [worker]="base format contract core worker"
  [operations]="base format contract core worker operations"
  [serve]="base format contract core worker operations serve"
  [cli]="base format contract core worker operations serve cli"
)
layers=(base format contract core worker operations serve cli)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for layer in "${layers[@]}"; do
  flags=(-std=c++17 -fsyntax-only -I"$src/include")
  for dep in ${below[$layer]}; do flags+=(-I"$build/layers/$dep"); done
  for other in "${layers[@]}"; do
    header=$(cd "$src/src/$other" && find . -name '*.h' | sed 's#^\./##' | sort | head -1)
    printf '#include "%s/%s"\n' "$other" "$header" >"$tmp/probe.cc"
    if [[ " ${below[$layer]} " == *" $other "* ]]; then want=0; else want=1; fi
    "$cxx" "${flags[@]}" "$tmp/probe.cc" 2>"$tmp/err"
    got=$?
    if [ "$want" -eq 0 ] && [ "$got" -ne 0 ]; then
      echo "FAIL: $layer cannot include $other/$header:"; head -3 "$tmp/err"; fail=1
    elif [ "$want" -eq 1 ] && [ "$got" -eq 0 ]; then
      echo "FAIL: $layer can include $other/$header, a layer above it"; fail=1
    elif [ "$want" -eq 1 ] && ! grep -q "No such file" "$tmp/err"; then
      echo "FAIL: $layer including $other/$header failed for another reason:"; head -3 "$tmp/err"; fail=1
    fi
  done
  # The sources as written.
  while IFS= read -r hit; do
    inc=$(sed -E 's/.*#include "([^/"]+)\/.*/\1/' <<<"$hit")
    [ "$inc" = tsarchive ] && continue
    if [[ " ${below[$layer]} " != *" $inc "* ]]; then echo "FAIL: upward include: $hit"; fail=1; fi
  done < <(grep -rHn --include='*.h' --include='*.cc' '#include "[a-z_]*/' "$src/src/$layer" 2>/dev/null)
done
# The torch layer sees core and below, never worker or cli.
if grep -rHn --include='*.h' --include='*.cc' '#include "\(worker\|operations\|serve\|cli\)/' "$src"/src/torch; then fail=1; fi
# The installed headers include only the standard library and each other.
if grep -Hn '#include "' "$src"/include/tsarchive/*.h | grep -v '#include "tsarchive/'; then fail=1; fi
[ "$fail" -eq 0 ] && echo "layering: ${#layers[@]} layers, every include downward"
exit $fail
