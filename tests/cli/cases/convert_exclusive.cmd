convert testdata/jit/gru.pt --input 1x5x4 --mobile --optimize-for-inference -o /tmp/tsarchive-golden-convert_exclusive.pt
