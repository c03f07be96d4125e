inspect testdata/model.onnx
