extra list testdata/torch_package/scaler_package.pt
