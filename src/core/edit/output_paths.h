// Paths a command writes (-o, --save-inputs, --save-outputs, --trace-out,
// extra export's folder): one rule for every writer (README "Safety", man
// page FILES). One is refused, Error(Usage), before anything is read or run,
// when it
//  - is a symbolic link: writing through it changes a file the command line
//    does not name (a link planted in a shared folder points anywhere), and
//    replacing it silently changes what the link's other users read; writers
//    used to differ (-o wrote through, --save-outputs replaced the link);
//  - is the same file as one the command reads (device and inode, so also
//    through links, hard links and other spellings): the write destroys it;
//  - is the same file as another output, which would keep only the last write.
// The writers (file_edit.h) apply the link rule again where they write, for a
// link made after the command's check. "-" (a standard stream) is left to the
// command; an input that does not exist is not compared.
#pragma once

#include <string>
#include <vector>

namespace tsarchive {

struct NamedPath {
  std::string role;  // how the command line names it: "-o", "--save-outputs", "the model"
  std::string path;
};

void check_output_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// The link rule alone: Error(Usage) "X is a symbolic link; tsarchive does not
// write through links: give the real path" when `path` is one.
void refuse_link_output(const std::string& path);

}  // namespace tsarchive
