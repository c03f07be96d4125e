inspect --json testdata/frozen.pt
