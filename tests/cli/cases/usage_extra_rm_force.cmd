extra rm --force testdata/mlp_scripted.pt labels.json
