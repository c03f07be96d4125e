run testdata/run/multi_io.pt --input 2x3 --input json:"two"
