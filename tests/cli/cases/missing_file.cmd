inspect testdata/does_not_exist.pt
