#include "cli/report_load_safety.h"

#include <algorithm>

#include "cli/output.h"

namespace tsarchive::cli {

using json = nlohmann::ordered_json;
namespace {

constexpr size_t kShownFindings = 12;

}  // namespace

std::string load_safety_summary(const LoadSafety& s) {
  if (std::string line = s.worst_line(); !line.empty()) return line;
  return "nothing beyond the allowlist (" + plural(s.globals.size(), "global") + ")";
}

void render_load_safety_text(const LoadSafety& s, std::ostream& out) {
  out << "\nLoading (what each loader would run; allowlists of PyTorch " << printable(s.torch_version) << ")\n";
  size_t width = 0;
  for (const LoaderVerdict& v : s.loaders) width = std::max(width, v.loader.size());
  for (const LoaderVerdict& v : s.loaders) {
    out << "  " << v.loader << std::string(width + 2 - v.loader.size(), ' ') << printable(v.outcome) << ": " << printable(v.why)
        << '\n';
  }
  if (s.findings.empty()) {
    out << "  verdict" << std::string(width > 5 ? width - 5 : 2, ' ') << "safe: " << printable(load_safety_summary(s)) << '\n';
    return;
  }
  out << "  verdict" << std::string(width > 5 ? width - 5 : 2, ' ') << "UNSAFE ("
      << load_risk_id(s.worst()) << "), " << plural(s.findings.size(), "finding") << '\n';
  std::vector<const LoadFinding*> sorted;
  for (const LoadFinding& f : s.findings) sorted.push_back(&f);
  std::stable_sort(sorted.begin(), sorted.end(), [](const LoadFinding* a, const LoadFinding* b) { return a->risk > b->risk; });
  for (size_t i = 0; i < sorted.size() && i < kShownFindings; ++i) {
    const LoadFinding& f = *sorted[i];
    out << "  ! " << load_risk_id(f.risk) << ": " << printable(f.where) << ": " << printable(f.what) << '\n';
    if (!f.attacks.empty()) out << "      attacks: " << printable(f.attacks) << '\n';
  }
  if (sorted.size() > kShownFindings) out << "  ... " << sorted.size() - kShownFindings << " more (--json lists all)\n";
}

nlohmann::ordered_json load_safety_to_json(const LoadSafety& s) {
  json loaders = json::array();
  for (const LoaderVerdict& v : s.loaders) loaders.push_back({{"loader", v.loader}, {"outcome", v.outcome}, {"why", v.why}});
  json findings = json::array();
  for (const LoadFinding& f : s.findings) {
    json o = {{"risk", load_risk_id(f.risk)}, {"where", f.where}, {"what", f.what}};
    if (!f.global.empty()) o["global"] = f.global;
    if (!f.category.empty()) o["category"] = f.category;
    if (!f.attacks.empty()) o["attacks"] = f.attacks;
    findings.push_back(std::move(o));
  }
  json out = {{"torch_version", s.torch_version},
              {"safe", !s.unsafe()},
              {"risk", load_risk_id(s.worst())},
              {"tensor_rebuilding_only", s.tensor_rebuilding_only},
              {"pickles", s.pickles},
              {"globals", s.globals},
              {"callables", s.callables},
              {"loaders", std::move(loaders)},
              {"findings", std::move(findings)}};
  if (const std::optional<LoadSafety::Acceptance> accept = s.acceptance()) {
    out["accepted_with"] = {{"allow_global", accept->allow_globals}, {"load_library", accept->load_library}};
  }
  return out;
}

}  // namespace tsarchive::cli
