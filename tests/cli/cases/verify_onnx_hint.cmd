verify testdata/model.onnx
