verify testdata/hostile/truncated_tail.pt
