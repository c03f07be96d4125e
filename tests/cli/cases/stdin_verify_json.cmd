verify --json -
