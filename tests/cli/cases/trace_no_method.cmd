trace testdata/jit/gru.pt --method nope --input 1x5x4 -o /tmp/tsarchive-golden-trace_no_method.pt
