extra get testdata/mlp_scripted.pt config/train.yaml
