inspect --color=always testdata/no_such_model.pt
