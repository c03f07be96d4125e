inspect --json testdata/pt2/buffers_consts.pt2
