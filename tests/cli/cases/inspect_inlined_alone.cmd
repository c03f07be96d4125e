inspect testdata/jit/gru.pt --inlined
