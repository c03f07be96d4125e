run testdata/versions/bytecode10_mlp.ptl --input 2x8
