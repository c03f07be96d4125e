extra set testdata/mlp_scripted.pt novalue
