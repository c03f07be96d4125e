verify testdata/versions/format11_mlp.pt
