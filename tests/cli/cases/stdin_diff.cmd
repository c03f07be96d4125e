diff - testdata/mlp_scripted_v2.pt -q
