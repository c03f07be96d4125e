diff testdata/hostile/not_zip.pt testdata/mlp_scripted.pt
