verify testdata/loadsafety/benign/torch1_13/state_dict.pth --allow-global nodot
