verify testdata/pt2/buffers_consts_aoti.pt2
