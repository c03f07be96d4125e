// What an operation has to tell its user while it works, before its report
// is ready: notes that cannot wait for the report (an archive read unchecked
// under --no-validate, a worker sandbox the kernel offers only in part, an
// interrupted edit found beside the file). The front end decides how a note
// looks: the CLI prints "tsarchive: note: ..." on stderr, the server logs it.
#pragma once

#include <functional>
#include <string>

namespace tsarchive {

using NoteSink = std::function<void(const std::string& note)>;

}  // namespace tsarchive
