run testdata/mlp_scripted.pt testdata/mlp.ptl --input 2x10
