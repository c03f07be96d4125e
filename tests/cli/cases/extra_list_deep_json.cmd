extra list testdata/hostile/extra_json_deep.pt
