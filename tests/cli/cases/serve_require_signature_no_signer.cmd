serve testdata/mlp_scripted.pt --require-signature
