inspect testdata/pt2/mlp_dynamic.pt2
