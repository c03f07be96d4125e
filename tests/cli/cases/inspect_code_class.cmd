inspect testdata/mlp_scripted.pt --code MLP
