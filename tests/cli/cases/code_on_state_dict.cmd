inspect testdata/state_dict.pth --code
