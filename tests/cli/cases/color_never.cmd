inspect --color=never testdata/no_such_model.pt
