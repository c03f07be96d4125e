extra set testdata/mlp_scripted.pt a=@testdata/does-not-exist
