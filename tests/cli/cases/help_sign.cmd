sign --help
