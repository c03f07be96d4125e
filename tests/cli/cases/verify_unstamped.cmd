verify testdata/mlp_scripted.pt
