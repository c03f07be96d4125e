run testdata/pt2/mlp_dynamic_aoti.pt2 --sample-inputs
