inspect testdata/hostile/truncated_tail.pt
