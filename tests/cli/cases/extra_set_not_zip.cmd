extra set testdata/hostile/not_zip.pt a=b
