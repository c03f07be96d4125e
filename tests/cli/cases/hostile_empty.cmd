inspect testdata/hostile/empty.pt
