verify --threads 0 testdata/mlp_scripted.pt
