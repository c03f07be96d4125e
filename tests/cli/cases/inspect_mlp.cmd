inspect testdata/mlp_scripted.pt
