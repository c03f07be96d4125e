extra get testdata/mlp_scripted.pt labels.json --json
