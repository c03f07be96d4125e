extra get - labels.json -o -
