#!/usr/bin/env bash
# The hook library as a user gets it: cmake --install, find_package(tsarchive)
# from the example under examples/, a host program that saves a module, and
# the stamp it carries without any code at the save.
#   hook_package.sh BUILD_DIR SOURCE_DIR TSARCHIVE
set -euo pipefail
build=$1 src=$2 tsarchive=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/examples/stamp_on_save" -B "$work/example" -G Ninja \
      -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/example" -j2 >/dev/null

SOURCE_DATE_EPOCH=1700000000 "$work/example/stamp_on_save" "$src/testdata/mlp_scripted.pt" "$work/out.pt"
stamp=$("$tsarchive" extra get "$work/out.pt" producer_info.json)
echo "stamp written by the hook: $stamp"
for want in '"_type":"https://tsarchive.dev/producer-info/v1"' '"name":"stamp_on_save"' '"method":"export-hook"' \
            '"moduleType":"__torch__.models.MLP"' '"team":"examples"' '"createdAt":"2023-11-14T22:13:20Z"'; do
  if [[ $stamp != *"$want"* ]]; then echo "FAIL: the stamp lacks $want" >&2; exit 1; fi
done
if [[ $stamp == *'"host"'* ]]; then echo "FAIL: host recorded although the example opted out" >&2; exit 1; fi

# Without digests verify passes and says how to add them; stamp --keep-bytes adds them.
"$tsarchive" verify "$work/out.pt" | grep -q "carries no digests"
"$tsarchive" stamp --keep-bytes --no-git "$work/out.pt" >/dev/null
"$tsarchive" verify "$work/out.pt" | grep -q "matches its stamp"
"$tsarchive" extra get "$work/out.pt" producer_info.json | grep -q '"previous":{'
echo "ok: the installed package links, the hook stamps, verify and stamp --keep-bytes complete it"
