verify testdata/torch_package/scaler_package.pt
