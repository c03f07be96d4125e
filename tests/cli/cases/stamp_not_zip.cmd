stamp testdata/hostile/not_zip.pt --keep-bytes -o /nonexistent/out.pt
