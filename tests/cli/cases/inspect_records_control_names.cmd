inspect --records testdata/hostile/name_control_chars.pt
