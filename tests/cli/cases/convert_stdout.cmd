convert testdata/mlp_scripted.pt --input 2x8 --freeze -o -
