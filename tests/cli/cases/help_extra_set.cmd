extra set --help
