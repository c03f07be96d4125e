diff --ignore-stamp --ignore-extra testdata/mlp_scripted.pt testdata/mlp_scripted_v2.pt
