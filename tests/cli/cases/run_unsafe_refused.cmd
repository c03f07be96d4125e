run testdata/loadsafety/evil/view_code_upper_py.pt --input 2
