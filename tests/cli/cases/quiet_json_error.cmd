extra list -q --json testdata/no_such_model.pt
