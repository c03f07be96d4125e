#pragma once

#include <fstream>
#include <sstream>
#include <string>

inline std::string testdata(const std::string& name) { return std::string(TSARCHIVE_TESTDATA_DIR) + "/" + name; }

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
