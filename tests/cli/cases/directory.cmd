inspect testdata
