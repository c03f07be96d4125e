verify testdata/loadsafety/evil/custom_class.pt --allow-global mymodel.Config
