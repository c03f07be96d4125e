diff testdata/torch_package/scaler_package.pt testdata/mlp_scripted.pt
