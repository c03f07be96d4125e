inspect --json --code testdata/mlp_scripted.pt
