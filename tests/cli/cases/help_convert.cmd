convert --help
