stamp --help
