inspect testdata/hostile/truncated.pt
