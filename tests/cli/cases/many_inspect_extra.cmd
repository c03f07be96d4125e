inspect --extra labels.json testdata/mlp_scripted.pt testdata/mlp.ptl
