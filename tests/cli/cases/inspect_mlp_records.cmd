inspect --records testdata/mlp_scripted.pt
