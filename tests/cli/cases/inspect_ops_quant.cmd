inspect testdata/quant_dynamic.pt --ops
