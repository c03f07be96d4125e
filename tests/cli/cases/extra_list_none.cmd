extra list testdata/convnet_traced.pt
