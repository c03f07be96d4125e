run testdata/hostile/truncated.pt --input 2x8
