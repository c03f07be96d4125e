inspect testdata/mlp.ptl
