#include "core/pt2_run.h"

#include <algorithm>

#include "base/error.h"
#include "core/input_values.h"
#include "format/byte_source.h"

namespace tsarchive {
namespace {

std::string model_names(const Pt2Contents& contents) {
  std::string names;
  for (const Pt2AotiModel& m : contents.aoti) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

// The position of a kwarg among the program's user inputs; past the end when
// the program does not name it.
size_t user_input_position(const Pt2Contents& contents, const std::string& model, const std::string& name) {
  for (const Pt2Program& p : contents.programs) {
    if (p.name != model) continue;
    size_t position = 0;
    for (const Pt2Arg& a : p.inputs) {
      if (a.kind != "user_input") continue;
      if (a.name == name) return position;
      ++position;
    }
  }
  return SIZE_MAX;
}

}  // namespace

Pt2RunTarget select_aoti_model(const Pt2Contents& contents, const std::string& requested, const std::string& file) {
  if (contents.aoti.empty()) {
    const std::string what = contents.programs.empty()
                                 ? "the .pt2 holds no AOTInductor model (no data/aotinductor/<model>/)"
                                 : "the .pt2 is a torch.export program without compiled artifacts (no data/aotinductor/); "
                                   "run executes AOTInductor packages";
    throw_bad_input(what, file,
                    "compile it in Python: torch._inductor.aoti_compile_and_package(torch.export.load(PATH), "
                    "package_path=\"model_aoti.pt2\"), then run that package");
  }
  const std::string name = !requested.empty() ? requested : contents.aoti.size() == 1 ? contents.aoti.front().name : "model";
  for (const Pt2AotiModel& m : contents.aoti) {
    if (m.name == name) return Pt2RunTarget{m.name, m.device};
  }
  if (requested.empty()) {
    throw Error(ErrorKind::Usage,
                "the package holds " + std::to_string(contents.aoti.size()) + " AOTInductor models and none is named 'model'",
                file, "choose one with --method NAME: " + model_names(contents));
  }
  throw Error(ErrorKind::Usage, "the package has no AOTInductor model '" + requested + "'", file,
              "its models are: " + model_names(contents));
}

void check_aoti_device(const Pt2RunTarget& target, const std::string& device, const std::string& file) {
  const std::string type = device.substr(0, device.find(':'));
  if (target.device.empty() || type == target.device) return;
  throw Error(ErrorKind::Usage, "AOTInductor model '" + target.model + "' was compiled for " + target.device + ", not " + type,
              file,
              target.device == "cpu" || target.device == "cuda"
                  ? "run it with --device " + target.device + ", or compile the program again for " + type
                  : "compile the program again for " + type);
}

HostValue read_pt2_sample_inputs(const TorchArchive& archive, const Pt2Contents& contents, const std::string& model,
                                 const std::string& file) {
  const std::string name = "data/sample_inputs/" + model + ".pt";
  const Record* record = archive.find(name);
  if (record == nullptr) {
    throw Error(ErrorKind::Usage, "the package has no sample inputs for '" + model + "' (no " + name + ")", file,
                "give the inputs with --input; aoti_compile_and_package writes none, "
                "torch.export.pt2_archive._package.package_pt2(..., exported_programs=, aoti_files=) keeps the program's");
  }
  HostValue saved;
  try {
    saved = read_torch_save_value(*make_memory_source(archive.read(*record, Pt2Limits::kSampleInputs), name));
  } catch (const Error& e) {
    throw e.with_file(file);
  }
  const bool pair = saved.kind == HostValue::Kind::List && saved.items.size() == 2 &&
                    saved.items[0].kind == HostValue::Kind::List && saved.items[1].kind == HostValue::Kind::Dict;
  if (!pair) {
    throw_bad_input(name + " is not torch.save of (args, kwargs)", file,
                    "the package's sample inputs are damaged; give the inputs with --input");
  }
  HostValue inputs;
  inputs.kind = HostValue::Kind::List;
  inputs.tuple = true;
  inputs.spreads = true;
  inputs.origin = name;
  inputs.items = std::move(saved.items[0].items);
  std::vector<std::pair<std::string, HostValue>> kwargs = std::move(saved.items[1].entries);
  std::stable_sort(kwargs.begin(), kwargs.end(), [&](const auto& a, const auto& b) {
    return user_input_position(contents, model, a.first) < user_input_position(contents, model, b.first);
  });
  for (auto& [key, value] : kwargs) inputs.items.push_back(std::move(value));
  for (HostValue& v : inputs.items) v.origin = name;
  return inputs;
}

}  // namespace tsarchive
