inspect testdata/mlp_scripted.pt --extra config/train.yaml
