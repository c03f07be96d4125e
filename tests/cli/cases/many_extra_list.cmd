extra list testdata/mlp_scripted.pt testdata/mlp.ptl testdata/dtypes.pt
