extra export --help
