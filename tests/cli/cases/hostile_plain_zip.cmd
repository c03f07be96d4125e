inspect testdata/hostile/plain_zip.zip
