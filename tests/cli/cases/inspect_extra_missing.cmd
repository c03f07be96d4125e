inspect testdata/mlp_scripted.pt --extra nope.txt
