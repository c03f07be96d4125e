inspect testdata/no_such_model.pt --json
