run testdata/state_dict.pth --input 2x8
