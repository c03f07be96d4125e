run testdata/mlp_scripted.pt
