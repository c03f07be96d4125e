#include <cstdlib>
#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) {
  // libzip converts each entry's DOS time with mktime(); with TZ unset, glibc
  // stats /etc/localtime on every call (265 stats for a 265-record archive).
  // Naming the same file once keeps local time identical and stops that.
  setenv("TZ", ":/etc/localtime", /*overwrite=*/0);
  return tsarchive::cli::run(argc, argv, std::cout, std::cerr);
}
