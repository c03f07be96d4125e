extra export testdata/hostile/truncated.pt /tmp/never-created-by-tsarchive
