extra set testdata/mlp_scripted.pt -o /tmp/x.pt owner=@- note=@-
