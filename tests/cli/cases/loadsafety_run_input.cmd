run testdata/mlp_scripted.pt --input @testdata/loadsafety/evil/reduce_system.pt
