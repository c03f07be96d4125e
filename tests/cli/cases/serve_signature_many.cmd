serve a=testdata/mlp_scripted.pt b=testdata/mlp_scripted.pt --key no-such-key.pem --signature no-such.sig
