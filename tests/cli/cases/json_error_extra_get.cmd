extra get testdata/mlp_scripted.pt no_such.json --json
