inspect --json testdata/torch_package/scaler_package.pt
