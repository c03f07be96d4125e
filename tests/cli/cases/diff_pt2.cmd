diff testdata/pt2/mlp_dynamic.pt2 testdata/pt2/mlp_dynamic_aoti.pt2
