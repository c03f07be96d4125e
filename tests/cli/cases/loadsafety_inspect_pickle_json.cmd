inspect testdata/loadsafety/evil/stack_global_memo.pkl --json
