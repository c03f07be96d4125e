run testdata/torch_package/scaler_package.pt --input 2x8
