diff testdata/dtypes.pt testdata/dtypes_v2.pt
