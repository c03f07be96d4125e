run testdata/mlp_scripted.pt --method forwrd --input 2x8
