extra set testdata/mlp_scripted.pt ../escape=1
