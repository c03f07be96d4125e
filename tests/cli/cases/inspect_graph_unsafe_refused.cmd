inspect testdata/loadsafety/evil/view_opaque_object_constants.pt --graph
