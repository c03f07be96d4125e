extra list --json testdata/hostile/extra_json_deep.pt
