verify --json testdata/mlp_scripted.pt --frob
