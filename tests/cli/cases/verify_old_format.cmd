verify testdata/versions/v1_mlp.pt
