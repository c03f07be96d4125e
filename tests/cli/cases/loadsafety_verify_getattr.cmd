verify testdata/loadsafety/evil/getattr_chain.pkl
