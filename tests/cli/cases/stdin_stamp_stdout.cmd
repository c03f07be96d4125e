stamp - -o -
