run testdata/pt2/mlp_dynamic.pt2 --input 2x4
