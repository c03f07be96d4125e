stamp testdata/torch_package/scaler_package.pt -o /nonexistent/out.pt
