diff testdata/mlp_scripted.pt testdata/mlp_scripted.pt
