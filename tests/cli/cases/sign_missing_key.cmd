sign testdata/mlp_scripted.pt --key testdata/no-such-key.pem -o /tmp/tsarchive-golden-no.sig
