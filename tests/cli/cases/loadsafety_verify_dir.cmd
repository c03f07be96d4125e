verify testdata/loadsafety/crafted
