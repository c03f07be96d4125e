inspect --color=sometimes testdata/mlp_scripted.pt
