diff --no-tensors --no-code testdata/mlp_scripted.pt testdata/mlp_scripted_v2.pt
