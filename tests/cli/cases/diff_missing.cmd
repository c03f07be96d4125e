diff testdata/mlp_scripted.pt testdata/missing.pt
