run testdata/mlp_scripted.pt --sample-inputs
