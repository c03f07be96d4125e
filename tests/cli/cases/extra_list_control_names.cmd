extra list testdata/hostile/name_control_chars.pt
