extra list testdata/mlp_scripted.pt
