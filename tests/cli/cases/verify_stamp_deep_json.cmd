verify testdata/hostile/stamp_json_deep.pt
