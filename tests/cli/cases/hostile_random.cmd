inspect testdata/hostile/random.bin
