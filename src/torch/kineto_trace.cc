#include "kineto_trace.h"

#include <torch/version.h>

#include "base/error.h"

#if TORCH_VERSION_MAJOR >= 2
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#endif

namespace tsarchive::torch_layer {

#if TORCH_VERSION_MAJOR >= 2

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

namespace {

// A private folder for the trace: Kineto's save() takes a path, writes
// PATH.tmp and renames it to PATH, so it cannot write to a descriptor.
class StagingFolder {
 public:
  StagingFolder() {
    const char* tmp = ::getenv("TMPDIR");
    std::string base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    std::string pattern = base + "/tsarchive-kineto-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error(ErrorKind::Io, std::string("cannot make a folder for Kineto's trace: ") + std::strerror(errno), base,
                  "set TMPDIR to a writable folder");
    }
    path_ = pattern;
  }
  ~StagingFolder() {
    for (const char* name : {"/trace.json", "/trace.json.tmp"}) ::unlink((path_ + name).c_str());
    ::rmdir(path_.c_str());
  }
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

bool kineto_available() {
  // libtorch_cpu exports libkineto's entry point where it was built with
  // Kineto (pip's wheels); without it (USE_KINETO=0) the profiler still runs
  // but ProfilerResult::save() throws. The library is found by one of its
  // functions, as the torch layer may be loaded RTLD_LOCAL.
  static const bool available = [] {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&profiler::disableProfiler), &info) == 0 || info.dli_fname == nullptr) {
      return false;
    }
    void* library = ::dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (library == nullptr) return false;
    const bool found = ::dlsym(library, "libkineto_init") != nullptr;
    ::dlclose(library);
    return found;
  }();
  return available;
}

KinetoTrace::KinetoTrace(bool record_shapes, bool cuda) {
  // Kineto logs each start and stop to stderr ("USDT:... profiler_start",
  // "STAGE:... Completed Stage: Warm Up"): noise under tsarchive's own
  // output. KINETO_LOG_LEVEL is read when Kineto initializes, on the first
  // prepareProfiler; 6 is above its highest level. A user's own setting wins.
  ::setenv("KINETO_LOG_LEVEL", "6", /*overwrite=*/0);
  // As torch.profiler.profile(activities=[CPU(, CUDA)], record_shapes=...):
  // prepare (Kineto's warm-up: CUPTI buffers) then enable on this thread.
  const ProfilerConfig config(ProfilerState::KINETO, record_shapes);
  std::set<ActivityType> activities = {ActivityType::CPU};
  if (cuda) activities.insert(ActivityType::CUDA);
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  active_ = true;
}

KinetoTrace::~KinetoTrace() {
  if (!active_) return;
  try {
    profiler::disableProfiler();
  } catch (...) {  // already failing: the first error is the one reported
  }
}

std::string KinetoTrace::finish(const std::string& trace_name) {
  active_ = false;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  StagingFolder folder;
  const std::string path = folder.path() + "/trace.json";
  result->save(path);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (!in || text.empty()) {
    throw Error(ErrorKind::Io, "Kineto wrote no trace", folder.path(), "check that TMPDIR has room and is writable");
  }
  // The trace ends with "traceName": "<the path save() was given>": the
  // staging folder, which is gone; name the file it becomes, as Python's
  // export does (escaped, which Kineto does not do).
  const std::string staged = "\"traceName\": \"" + path + "\"";
  const size_t at = text.rfind(staged);
  if (at != std::string::npos) {
    const std::string name =
        nlohmann::json(trace_name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text.replace(at, staged.size(), "\"traceName\": " + name);
  }
  return text;
}

#else  // libtorch 1.x: no Kineto to ask for (Debian's 1.13 is built without it)

bool kineto_available() { return false; }

KinetoTrace::KinetoTrace(bool, bool) {
  throw Error(ErrorKind::Torch, "this libtorch has no Kineto", {}, "leave out --trace-out");
}
KinetoTrace::~KinetoTrace() = default;
std::string KinetoTrace::finish(const std::string&) { return {}; }

#endif

}  // namespace tsarchive::torch_layer
