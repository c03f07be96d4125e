verify testdata/loadsafety/crafted/torchscript_named.pth --torch-version 2.5
