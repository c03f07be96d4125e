convert testdata/jit/convnet.pt --input 1x3x32x32 --optimize-for-inference -o /tmp/tsarchive-golden-convert_unloadable.pt
