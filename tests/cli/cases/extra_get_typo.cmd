extra get testdata/mlp_scripted.pt labls.json
