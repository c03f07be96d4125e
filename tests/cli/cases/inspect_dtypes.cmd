inspect testdata/dtypes.pt
