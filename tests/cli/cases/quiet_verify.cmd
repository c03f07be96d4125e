verify -q testdata/mlp_scripted.pt testdata/hostile/random.bin
