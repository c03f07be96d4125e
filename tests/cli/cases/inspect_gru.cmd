inspect testdata/gru_scripted.pt
