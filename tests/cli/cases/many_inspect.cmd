inspect testdata/mlp_scripted.pt testdata/mlp.ptl
