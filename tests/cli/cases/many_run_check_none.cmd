run testdata/mlp_scripted.pt testdata/mlp.ptl --check
