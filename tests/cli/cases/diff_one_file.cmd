diff testdata/mlp_scripted.pt
