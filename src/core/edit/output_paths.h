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
//  - is the same file as another output, which would keep only the last write;
//  - is a pipe, socket or device: writers make a new file and rename it into
//    place, so they would replace it, not write into it (and opening a pipe
//    to look would block).
// The writers (file_edit.h) apply the link and the pipe rules again where they
// write, for a link or pipe made after the command's check. "-" (a standard
// stream) is left to the command; an input that does not exist is not compared.
#pragma once

#include <sys/stat.h>

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

// The pipe rule alone, for `st` (from lstat or stat, never an open): Error(Usage)
// "`shown` is a pipe, not a regular file: ..." for a pipe, socket or device.
void refuse_special_output(const std::string& shown, const struct stat& st);

}  // namespace tsarchive
