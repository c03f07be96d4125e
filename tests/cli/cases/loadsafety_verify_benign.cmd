verify testdata/loadsafety/benign/torch1_13/checkpoint.pt
