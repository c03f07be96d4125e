trace testdata/jit/labelled.pt --input 2x3 -o /tmp/tsarchive-golden-trace_throws.pt
