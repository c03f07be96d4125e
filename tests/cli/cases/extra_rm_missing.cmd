extra rm testdata/mlp_scripted.pt nothere
