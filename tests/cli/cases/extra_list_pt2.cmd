extra list testdata/pt2/with_extra.pt2
