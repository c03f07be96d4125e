#!/usr/bin/env bash
# Edits copies of real PyTorch archives with `tsarchive extra` and has libtorch
# (torch::jit::load with an ExtraFilesMap) read them back.
#   extra_load.sh TSARCHIVE LOAD_CHECK TESTDATA_DIR
set -euo pipefail
tsarchive=$1 check=$2 testdata=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for model in mlp_scripted.pt convnet_traced.pt quant_dynamic.pt mlp.ptl; do
  cp "$testdata/$model" "$work/$model"
  m=$work/$model
  "$tsarchive" extra set "$m" producer.json='{"by":"ci"}' notes/a.txt=hello >/dev/null
  "$check" "$m" "$testdata/$model" producer.json='{"by":"ci"}' notes/a.txt=hello
  "$tsarchive" extra set --in-place "$m" notes/a.txt=changed >/dev/null
  "$check" "$m" "$testdata/$model" producer.json='{"by":"ci"}' notes/a.txt=changed
  "$tsarchive" extra rm "$m" producer.json -o "$work/out.pt" >/dev/null
  "$check" "$work/out.pt" "$testdata/$model" producer.json= notes/a.txt=changed
done
# A replaced extra file written by PyTorch itself, followed by every other record.
cp "$testdata/mlp_scripted.pt" "$work/m.pt"
"$tsarchive" extra set "$work/m.pt" model_card.md='# new card, another length' >/dev/null
"$check" "$work/m.pt" "$testdata/mlp_scripted.pt" model_card.md='# new card, another length' labels.json='{"classes": ["cat", "dog", "bird"]}'
