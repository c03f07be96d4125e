inspect testdata/hostile/not_zip.pt
