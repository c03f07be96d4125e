inspect testdata/loadsafety/evil/reduce_system.pt
