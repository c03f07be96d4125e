inspect testdata/pt2/with_extra.pt2 --extra labels.json
