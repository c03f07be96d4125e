inspect -
