run testdata/mlp_scripted.pt --input 1,3,224,224
