verify testdata/mlp_scripted.pt testdata/hostile/random.bin testdata/mlp.ptl
