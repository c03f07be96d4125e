stamp testdata/model.onnx -o /nonexistent/out.pt
