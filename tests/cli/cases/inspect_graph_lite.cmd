inspect testdata/mlp.ptl --graph
