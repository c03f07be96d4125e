inspect --jsn testdata/mlp_scripted.pt
