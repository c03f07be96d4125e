extra get -q testdata/images/colors.pt labels.json -o -
