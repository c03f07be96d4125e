verify testdata/state_dict.pth
