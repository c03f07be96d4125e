inspect testdata/mlp_scripted.pt --extra labels.json
