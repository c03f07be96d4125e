extra set testdata/state_dict.pth a=b
