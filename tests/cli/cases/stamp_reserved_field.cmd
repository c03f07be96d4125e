stamp testdata/mlp_scripted.pt --keep-bytes --field _type=x -o /nonexistent/out.pt
