convert testdata/mlp.ptl --input 2x8 -o /tmp/tsarchive-golden-unwritten.pt
