extra get testdata/mlp_scripted.pt nothere
