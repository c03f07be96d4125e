inspect --ops testdata/torch2/sdpa.pt
