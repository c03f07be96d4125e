convert testdata/mlp.ptl --input 2x8 -o /tmp/tsarchive-golden-convert_lite_input.pt
