// Paths a command writes (-o, --save-inputs, --save-outputs, --trace-out):
// one rule for every writer (README "Safety", man page FILES). One is
// refused, Error(Usage), before anything is read or run, when it
//  - is the same file as one the command reads (device and inode, so also
//    through links, hard links and other spellings): the write destroys it;
//  - is the same file as another output, which would keep only the last write.
// "-" (a standard stream) is left to the command; an input that does not
// exist is not compared.
#pragma once

#include <string>
#include <vector>

namespace tsarchive {

struct NamedPath {
  std::string role;  // how the command line names it: "-o", "--save-outputs", "the model"
  std::string path;
};

void check_output_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

}  // namespace tsarchive
