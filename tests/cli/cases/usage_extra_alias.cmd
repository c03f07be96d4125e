extra ls testdata/mlp_scripted.pt
