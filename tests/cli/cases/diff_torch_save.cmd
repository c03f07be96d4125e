diff testdata/mlp_scripted.pt testdata/state_dict.pth
