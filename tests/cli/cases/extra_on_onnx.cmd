inspect testdata/model.onnx --extra labels.json
