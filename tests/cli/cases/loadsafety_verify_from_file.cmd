verify testdata/loadsafety/evil/from_file.pt
