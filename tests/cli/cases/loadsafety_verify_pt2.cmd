verify testdata/loadsafety/evil/pt2_pickled_weight.pt2
