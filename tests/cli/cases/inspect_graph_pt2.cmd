inspect --graph testdata/pt2/buffers_consts.pt2
