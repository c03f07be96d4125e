inpsect testdata/mlp_scripted.pt
