inspect --bogus testdata/mlp_scripted.pt
