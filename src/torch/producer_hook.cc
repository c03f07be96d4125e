// torch::jit's export hook: extra/producer_info.json in every archive saved.
#include <torch/csrc/jit/serialization/export.h>
#include <torch/version.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <ctime>
#include <stdexcept>

#include "export_hook.h"
#include "base/error.h"
#include "tsarchive/producer_hook.h"
#include "core/provenance/producer_info.h"

namespace tsarchive {
namespace torch_layer {

void install_stamp_hook(std::function<std::string(const std::string& module_type)> make_stamp) {
  torch::jit::SetExportModuleExtraFilesHook([make_stamp](const torch::jit::Module& module) {
    torch::jit::ExtraFilesMap files;
    files[kStampName] = make_stamp(module.type()->name() ? module.type()->name()->qualifiedName() : std::string());
    return files;
  });
}

void remove_stamp_hook() { torch::jit::SetExportModuleExtraFilesHook(nullptr); }

}  // namespace torch_layer

namespace {

std::string executable_name() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "unknown";
  const std::string path(buf, static_cast<size_t>(n));
  return path.substr(path.rfind('/') + 1);
}

}  // namespace

__attribute__((visibility("default"))) void install_producer_info_hook(const ProducerHookOptions& options) {
  StampContent content;
  try {
    ContextOptions context;
    context.host = options.host;
    context.git = options.git;
    content.context = collect_producer_context(context);
    content.producer_name = options.program.empty() ? executable_name() : options.program;
    content.producer_version = options.version;
    content.method = "export-hook";
    content.libtorch_version = TORCH_VERSION;
    content.fields = options.fields;
    content.module_type = "probe";
    render_stamp(content);  // checks the fields now, not at the first save
  } catch (const Error& e) {
    throw std::invalid_argument(std::string("tsarchive producer hook: ") + e.what());
  }
  // The time of each save, unless SOURCE_DATE_EPOCH pins it for reproducible builds.
  const bool pinned_time = std::getenv("SOURCE_DATE_EPOCH") != nullptr;
  torch_layer::install_stamp_hook([content, pinned_time](const std::string& module_type) {
    StampContent stamp = content;
    stamp.module_type = module_type;
    if (!pinned_time) stamp.context.created_at = rfc3339_utc(static_cast<int64_t>(std::time(nullptr)));
    return render_stamp(stamp);
  });
}

__attribute__((visibility("default"))) void remove_producer_info_hook() { torch_layer::remove_stamp_hook(); }

}  // namespace tsarchive
