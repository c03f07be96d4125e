#include "operations/run_images.h"

#include "base/error.h"
#include "base/strings.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/inputs/input_values.h"
#include "format/byte_source.h"

namespace tsarchive {
namespace {

constexpr uint64_t kMaxLabelsBytes = 16 << 20;

// The one tensor the outputs hold: a tensor, or a tuple/list of one.
HostTensor single_output(const RunReport& report, SaveFormat format, const char* flag) {
  auto source = make_memory_source(report.saved_outputs, "the outputs");
  if (format == SaveFormat::Npy) return read_npy(*source);
  HostValue v = read_torch_save_value(*source);
  if (v.kind == HostValue::Kind::List && v.items.size() == 1) v = v.items[0];
  if (v.kind != HostValue::Kind::Tensor) {
    throw_bad_input(std::string(flag) + " reads a single tensor output, but " + report.method + " returns " +
                        (v.kind == HostValue::Kind::List ? std::to_string(v.items.size()) + " values" : "no tensor"),
                    {}, "save the outputs as .pt and read them in Python");
  }
  return v.tensor;
}

std::vector<std::string> read_labels(const std::string& from, const TorchArchive& archive, std::string& named) {
  if (from.rfind("extra:", 0) == 0) {
    const std::string name = from.substr(6);
    if (archive.find(extra_record_name(name)) == nullptr) {
      throw_usage("--labels " + from.substr(0, 200) + ": the archive has no extra/" + name,
                  "'tsarchive extra list MODEL' lists its extra files");
    }
    named = "extra/" + name;
    return parse_labels(read_extra(archive, name, kMaxLabelsBytes), named);
  }
  named = from;
  auto source = open_file_source(from);
  if (source->size() > kMaxLabelsBytes) throw_bad_input("labels file over 16 MiB", from, "give one label per line");
  return parse_labels(source->read_string(0, static_cast<size_t>(source->size())), from);
}

}  // namespace

SaveFormat image_outputs_format(const RunImageOptions& opts, SaveFormat current) {
  if (opts.save_outputs.empty() && opts.top == 0) return current;
  return current == SaveFormat::None ? SaveFormat::Pt : current;
}

std::optional<TopReport> finish_image_outputs(const RunImageOptions& opts, const RunReport& report, SaveFormat format,
                                              const TorchArchive& archive) {
  if (!opts.save_outputs.empty()) {
    const ImageOutputSpec spec = parse_image_output(opts.save_outputs);
    const HostTensor tensor = single_output(report, format, "--save-outputs FILE.png");
    std::string png;
    try {
      png = output_tensor_png(tensor, spec);
    } catch (const Error& e) {
      throw e.with_file(spec.path);
    }
    write_file_atomically(spec.path, png);
  }
  if (opts.top == 0) return std::nullopt;
  TopReport top;
  std::vector<std::string> labels;
  if (!opts.labels.empty()) {
    labels = read_labels(opts.labels, archive, top.labels_from);
  } else if (archive.find(extra_record_name("labels.json")) != nullptr) {
    labels = read_labels("extra:labels.json", archive, top.labels_from);  // the archive's own, when it has them
  }
  top.classes = top_classes(single_output(report, format, "--top"), opts.top, labels);
  return top;
}

}  // namespace tsarchive
