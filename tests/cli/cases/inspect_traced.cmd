inspect testdata/convnet_traced.pt
