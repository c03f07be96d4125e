run testdata/mlp_scripted.pt --input testdata/run/mlp_in.npy
