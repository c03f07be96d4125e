extra get testdata/hostile/name_control_chars.pt nope
