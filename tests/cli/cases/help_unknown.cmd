help inpsect
