extra list --json testdata/hostile/name_not_utf8.pt
