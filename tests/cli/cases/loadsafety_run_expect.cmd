run testdata/mlp_scripted.pt --input 2x8 --expect @testdata/loadsafety/crafted/setitem_on_list.pt
