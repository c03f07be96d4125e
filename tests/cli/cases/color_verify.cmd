verify --color=always testdata/mlp_scripted.pt testdata/hostile/random.bin
