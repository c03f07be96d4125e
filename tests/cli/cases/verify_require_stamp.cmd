verify --require-stamp testdata/mlp_scripted.pt
