verify testdata/loadsafety/crafted/zip_aoti_traversal.pt2
