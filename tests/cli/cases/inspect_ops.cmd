inspect testdata/jit/convnet.pt --ops
