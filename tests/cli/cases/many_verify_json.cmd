verify --json testdata/mlp_scripted.pt testdata/no_such_model.pt
