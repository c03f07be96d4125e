// The load-safety verdict: the pickle scanner on hand-made bytes, and the
// verdict on every file of testdata/loadsafety (made by
// scripts/make_testdata_loadsafety.py; never unpickled).
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/inspect/load_safety.h"
#include "format/byte_source.h"
#include "format/pickle.h"
#include "format/pickle_scan.h"
#include "format/torchscript_code.h"
#include "helpers.h"

using namespace tsarchive;
using namespace std::string_literals;

namespace {

LoadSafety assess(const std::string& rel, LoadSafetyOptions o = {}) {
  return assess_load_safety(*open_file_source(testdata("loadsafety/" + rel)), o);
}

bool mentions(const LoadSafety& s, const std::string& text, LoadRisk risk) {
  for (const LoadFinding& f : s.findings) {
    if (f.risk == risk && (f.what.find(text) != std::string::npos || f.global == text)) return true;
  }
  return false;
}

std::string outcome(const LoadSafety& s, const std::string& loader) {
  for (const LoaderVerdict& v : s.loaders) {
    if (v.loader == loader) return v.outcome;
  }
  return "(none)";
}

std::string describe(const LoadSafety& s) {
  std::string out;
  for (const LoadFinding& f : s.findings) out += std::string(load_risk_id(f.risk)) + ": " + f.where + ": " + f.what + "\n";
  return out;
}

}  // namespace

TEST_CASE("pickle scan: STACK_GLOBAL takes its strings from the memo, past decoys") {
  // PROTO 4; 'builtins' MEMOIZE 'len' MEMOIZE POP POP 'os' MEMOIZE 'system' MEMOIZE POP POP
  // BINGET 2 BINGET 3 STACK_GLOBAL 'id' TUPLE1 REDUCE STOP
  std::string p = bytes({0x80, 4});
  for (const char* s : {"builtins", "len"}) p += bytes({0x8c, static_cast<int>(strlen(s))}) + s + "\x94";
  p += "00";
  for (const char* s : {"os", "system"}) p += bytes({0x8c, static_cast<int>(strlen(s))}) + s + "\x94";
  p += "00";
  p += bytes({'h', 2, 'h', 3, 0x93, 0x8c, 2}) + "id" + bytes({0x85, 'R', '.'});
  const PickleScan scan = scan_pickle(p);
  REQUIRE(scan.complete);
  REQUIRE(scan.imports.size() == 1);
  CHECK(scan.imports[0].full() == "os.system");
  CHECK(scan.imports[0].opcode == "STACK_GLOBAL");
  REQUIRE(scan.calls.size() == 1);
  CHECK(scan.calls[0].callable == "os.system");
}

TEST_CASE("pickle scan: a callable made by a call is named as such") {
  // getattr(x, 'system')('id') where x comes from a global
  const std::string p = "\x80\x02" "cbuiltins\ngetattr\n(cos\nenviron\nX\x06\x00\x00\x00systemtR(X\x02\x00\x00\x00idtR."s;
  const PickleScan scan = scan_pickle(p);
  REQUIRE(scan.complete);
  REQUIRE(scan.calls.size() == 2);
  CHECK(scan.calls[0].callable == "builtins.getattr");
  CHECK(scan.calls[1].callable == "<result of builtins.getattr>");
  CHECK_FALSE(scan.calls[1].callable_is_global);
}

TEST_CASE("pickle scan: INST, OBJ, EXT1 and NEWOBJ_EX are imports and calls") {
  CHECK(scan_pickle("(S'id'\nios\nsystem\n.").calls.at(0).callable == "os.system");
  CHECK(scan_pickle("(csubprocess\nPopen\nS'id'\no.").calls.at(0).opcode == "OBJ");
  CHECK(scan_pickle(bytes({0x80, 2, 0x82, 1, ')', 'R', '.'})).imports.at(0).opcode == "EXT1");
  const PickleScan ex = scan_pickle("\x80\x04" "cwebbrowser\nopen\n)}\x92.");
  CHECK(ex.calls.at(0).opcode == "NEWOBJ_EX");
}

TEST_CASE("pickle scan: SETITEM on a list, an early end, a bad memo key") {
  const PickleScan setitem = scan_pickle(bytes({0x80, 2, ']', 'K', 1, 'K', 2, 's', '.'}));
  CHECK(setitem.complete);
  REQUIRE(setitem.anomalies.size() == 1);
  CHECK(setitem.anomalies[0].find("SETITEM on a list") != std::string::npos);
  const PickleScan early = scan_pickle(bytes({0x80, 2, '}', 'X', 9, 0}));
  CHECK_FALSE(early.complete);
  const PickleScan memo = scan_pickle(bytes({0x80, 2, 'h', 7, '.'}));
  CHECK_FALSE(memo.complete);
  CHECK(memo.error.find("memo key 7") != std::string::npos);
}

TEST_CASE("pickle scan: every input gets a result, none throws") {
  std::string p;
  for (int i = 0; i < 4096; ++i) {
    p += static_cast<char>((i * 7919) & 0xff);
    CHECK_NOTHROW(scan_pickle(p));
  }
}

TEST_CASE("load safety: no benign checkpoint of the corpus is flagged") {
  const auto dir = std::filesystem::path(testdata("loadsafety/benign"));
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    ++files;
    const LoadSafety s = assess_load_safety(*open_file_source(e.path().string()));
    INFO(e.path().string() << "\n" << describe(s));
    CHECK_FALSE(s.unsafe());
    CHECK_FALSE(s.loaders.empty());
  }
  CHECK(files >= 20);
}

TEST_CASE("load safety: a state dict passes torch.load(weights_only=True); numpy scalars do not, in 2.13") {
  const LoadSafety sd = assess("benign/torch2_13/state_dict.pth");
  CHECK(outcome(sd, "torch.load(weights_only=True)") == "accepts");
  CHECK(sd.tensor_rebuilding_only);
  const LoadSafety ck = assess("benign/torch2_13/checkpoint.pt");
  CHECK(outcome(ck, "torch.load(weights_only=True)") == "refuses");
  CHECK_FALSE(ck.unsafe());  // numpy scalars are on tsarchive's allowlist
  CHECK_FALSE(ck.tensor_rebuilding_only);
}

TEST_CASE("load safety: protocol 4 pickles are refused by weights_only (no FRAME, MEMOIZE...)") {
  const LoadSafety p4 = assess("benign/torch2_13/plain_p4.pickle");
  CHECK_FALSE(p4.unsafe());
  CHECK(outcome(p4, "torch.load(weights_only=True)") == "refuses");
}

TEST_CASE("load safety: poisoned files name the call a loader would make") {
  const LoadSafety s = assess("evil/reduce_system.pt");
  INFO(describe(s));
  CHECK(mentions(s, "posix.system", LoadRisk::Dangerous));
  CHECK(s.worst() == LoadRisk::Dangerous);
  CHECK(outcome(s, "torch.load(weights_only=True)") == "refuses");
  CHECK(outcome(s, "torch.load(weights_only=False)") == "runs code");
  for (const char* f : {"evil/os_system.pkl", "evil/os_system.bin", "evil/os_system.ckpt", "evil/inst.pkl"}) {
    INFO(f);
    CHECK(mentions(assess(f), "os.system", LoadRisk::Dangerous));
  }
  CHECK(mentions(assess("evil/obj.pkl"), "subprocess.Popen", LoadRisk::Dangerous));
  CHECK(mentions(assess("evil/stack_global_memo.pkl"), "os.system", LoadRisk::Dangerous));
  CHECK(mentions(assess("evil/getattr_chain.pkl"), "<result of builtins.getattr>", LoadRisk::Dangerous));
  CHECK(mentions(assess("evil/legacy_system.pth"), "os.system", LoadRisk::Dangerous));
  CHECK(assess("evil/ext1.pkl").unsafe());
  CHECK(assess("evil/newobj_ex.pkl").worst() == LoadRisk::Dangerous);
}

TEST_CASE("load safety: bypasses of denylists are caught by the allowlist") {
  for (const char* f : {"evil/bypass_resolve_name.pkl", "evil/bypass_import_module.pkl", "evil/bypass_loads.pkl",
                        "evil/bypass_run.pkl", "evil/bypass_spawnv_passfds.pkl"}) {
    INFO(f);
    CHECK(assess(f).worst() >= LoadRisk::Dangerous);
  }
}

TEST_CASE("load safety: a team's own class is unlisted until --allow-global names it") {
  const LoadSafety s = assess("evil/custom_class.pt");
  CHECK(s.worst() == LoadRisk::Unlisted);
  CHECK(mentions(s, "mymodel.Config", LoadRisk::Unlisted));
  LoadSafetyOptions o;
  o.allowed_globals = {"mymodel.Config"};
  const LoadSafety allowed = assess("evil/custom_class.pt", o);
  INFO(describe(allowed));
  CHECK_FALSE(allowed.unsafe());
  CHECK(outcome(allowed, "torch.load(weights_only=True)") == "accepts");
  o.allowed_globals = {"mymodel.*"};
  CHECK_FALSE(assess("evil/custom_class.pt", o).unsafe());
}

TEST_CASE("load safety: crafted files are crafted, with the versions they attack") {
  for (const char* f : {"crafted/setitem_on_list.pt", "crafted/storage_size.pt", "crafted/persistent_id.pt",
                        "crafted/after_stop.pkl", "crafted/second_pickle.pkl",
                        "crafted/torchscript_named.pth"}) {
    const LoadSafety s = assess(f);
    INFO(f << "\n" << describe(s));
    CHECK(s.worst() == LoadRisk::Crafted);
    bool versions = false;
    for (const LoadFinding& x : s.findings) versions = versions || !x.attacks.empty();
    CHECK(versions);
  }
  CHECK(mentions(assess("crafted/second_pickle.pkl"), "os.system", LoadRisk::Dangerous));
  CHECK(mentions(assess("crafted/storage_size.pt"), "declares 100 float32 elements", LoadRisk::Crafted));
  const LoadSafety ts = assess("crafted/torchscript_named.pth");
  bool cve = false;
  for (const LoadFinding& x : ts.findings) cve = cve || x.attacks.find("CVE-2025-32434") != std::string::npos;
  CHECK(cve);
  LoadSafetyOptions old;
  old.torch_version = "2.5";
  CHECK(outcome(assess("crafted/torchscript_named.pth", old), "torch.load(weights_only=True)") == "runs code");
  CHECK(outcome(assess("crafted/torchscript_named.pth"), "torch.load(weights_only=True)") == "refuses");
}

TEST_CASE("load safety: TorchScript code that maps files, and a .pt2 weight stored as a pickle") {
  CHECK(mentions(assess("evil/from_file.pt"), "torch.from_file", LoadRisk::Dangerous));
  const LoadSafety pt2 = assess("evil/pt2_pickled_weight.pt2");
  INFO(describe(pt2));
  CHECK(mentions(pt2, "posix.system", LoadRisk::Dangerous));
  CHECK(outcome(pt2, "torch.export.load") == "runs code");
  CHECK_FALSE(assess_load_safety(*open_file_source(testdata("pt2/buffers_consts.pt2"))).unsafe());
}

TEST_CASE("load safety: weights_only allowlists differ by version") {
  CHECK(torch_weights_only_allows("torch._utils._rebuild_tensor_v2", "1.13"));
  CHECK(torch_weights_only_allows("torch.FloatStorage", "1.13"));
  CHECK_FALSE(torch_weights_only_allows("builtins.set", "1.13"));
  CHECK(torch_weights_only_allows("builtins.set", "2.13"));
  CHECK_FALSE(torch_weights_only_allows("numpy.core.multiarray.scalar", "2.13"));
  CHECK(dangerous_category("posix.system") == "process execution");
  CHECK(dangerous_category("mymodel.Config").empty());
  CHECK_FALSE(is_benign_global("os.system"));
}

TEST_CASE("load safety: an allowlisted name followed by attributes is not allowlisted") {
  // torch._utils._rebuild_tensor.__builtins__.get: protocol 4's find_class walks
  // the dots from an allowed function to builtins.exec.
  for (const char* f : {"evil/rebuild_prefix.pkl", "evil/rebuild_prefix.pt"}) {
    const LoadSafety s = assess(f);
    INFO(f << "\n" << describe(s));
    CHECK(mentions(s, "torch._utils._rebuild_tensor.__builtins__.get", LoadRisk::Dangerous));
    CHECK(s.worst() == LoadRisk::Dangerous);
  }
  CHECK_FALSE(is_benign_global("torch._utils._rebuild_tensor.__builtins__.get"));
  CHECK_FALSE(is_benign_global("torch._utils._rebuild_anything"));
  CHECK(is_benign_global("torch._utils._rebuild_tensor_v2"));
}

TEST_CASE("load safety: Python 2 names map as the unpicklers map them") {
  // torch.save's protocol 2 writes bytearray as __builtin__.bytearray:
  // PyTorch 2 maps it to builtins.bytearray and accepts it; 1.13 maps nothing.
  CHECK(torch_weights_only_allows("__builtin__.bytearray", "2.13"));
  CHECK_FALSE(torch_weights_only_allows("__builtin__.bytearray", "1.13"));
  CHECK(is_benign_global("__builtin__.bytearray"));
  CHECK(dangerous_category("cPickle.loads") == "code evaluation (a nested pickle)");
  for (const char* f : {"benign/torch2_13/bytearray.pt", "benign/torch1_13/bytearray.pt"}) {
    const LoadSafety s = assess(f);
    INFO(f << "\n" << describe(s));
    CHECK_FALSE(s.unsafe());
    CHECK(outcome(s, "torch.load(weights_only=True)") == "accepts");
  }
  LoadSafetyOptions old;
  old.torch_version = "1.13";
  CHECK(outcome(assess("benign/torch1_13/bytearray.pt", old), "torch.load(weights_only=True)") == "refuses");
}

TEST_CASE("load safety: TorchScript code is read as its compiler reads it") {
  const LoadSafety save = assess("evil/jit_save.pt");  // torch.save in __setstate__, which torch.jit.load runs
  INFO(describe(save));
  CHECK(mentions(save, "torch.save", LoadRisk::Dangerous));
  CHECK(mentions(assess("evil/getattr_save.pt"), "torch.save", LoadRisk::Dangerous));
  CHECK(mentions(assess("evil/from_file_spaced.pt"), "torch.from_file", LoadRisk::Dangerous));
  const LoadSafety op = assess("evil/custom_op.pt");  // printed as ops.myns.evil(x), not torch.ops
  CHECK(mentions(op, "torch.ops.myns", LoadRisk::Unlisted));
  LoadSafetyOptions mine;
  mine.allowed_globals = {"torch.ops.myns"};
  CHECK_FALSE(assess("evil/custom_op.pt", mine).unsafe());

  CHECK(code_dotted_names("x = torch . \\\n  from_file (  # c\n  p)") == std::vector<std::string>{"torch.from_file"});
  CHECK(code_dotted_names("getattr(getattr(torch, 'ops'), \"myns\").evil(x)") ==
        std::vector<std::string>{"torch.ops.myns.evil", "torch.ops", "torch"});
  CHECK(code_dotted_names("getattr(torch, 'not an attribute')(x)") == std::vector<std::string>{"torch"});
  // Strings and comments are not code; numbers have no attributes.
  CHECK(code_dotted_names("s = 'torch.save(x)'  # torch.from_file\nf = 1.5\nr = r\"a.b\"\nself.w\n") ==
        std::vector<std::string>{"self.w"});
  CHECK(code_dotted_names("'''torch.save\n''' + \"unterminated\n").empty());
}

TEST_CASE("load safety: autograd, aliases and classes in code are what the compiler makes of them") {
  // ops.prim.autograd.save is aten::save; t = torch; t.save(...) hides the call behind a name.
  const LoadSafety autograd = assess("evil/autograd_save.pt");
  INFO(describe(autograd));
  CHECK(mentions(autograd, "torch.save", LoadRisk::Dangerous));
  CHECK(mentions(assess("evil/alias_save.pt"), "uses the module 'torch' as a value", LoadRisk::Crafted));
  CHECK(mentions(assess("evil/code_custom_class.pt"), "torch.classes.myns.Evil", LoadRisk::Unlisted));
  CHECK(code_dotted_names("o = ops.myns\no.evil(x)") == std::vector<std::string>{"ops.myns", "o.evil"});
}

TEST_CASE("load safety: an AOTInductor package's shared library is native code from the file") {
  const LoadSafety aoti = assess_load_safety(*open_file_source(testdata("pt2/buffers_consts_aoti.pt2")));
  INFO(describe(aoti));
  CHECK(aoti.unsafe());
  CHECK(mentions(aoti, "aoti.model", LoadRisk::Unlisted));
  CHECK(outcome(aoti, "torch.export.load") == "runs code");
  LoadSafetyOptions mine;
  mine.allowed_globals = {"aoti.model"};
  CHECK_FALSE(assess_load_safety(*open_file_source(testdata("pt2/buffers_consts_aoti.pt2")), mine).unsafe());
}

TEST_CASE("load safety: every pickle torch.export.load reads is judged") {
  for (const char* f : {"evil/pt2_sample_inputs.pt2", "evil/pt2_opaque_obj.pt2", "evil/pt2_legacy_weights.pt2"}) {
    const LoadSafety s = assess(f);
    INFO(f << "\n" << describe(s));
    CHECK(mentions(s, "posix.system", LoadRisk::Dangerous));
    CHECK(outcome(s, "torch.export.load") == "runs code");
  }
  for (const char* f : {"pt2/buffers_consts.pt2", "pt2/mlp_dynamic.pt2", "pt2/with_extra.pt2"}) {
    const LoadSafety s = assess_load_safety(*open_file_source(testdata(f)));
    INFO(f << "\n" << describe(s));
    CHECK_FALSE(s.unsafe());
  }
}

TEST_CASE("load safety: an expr_str that sympy.sympify would eval is dangerous to torch.export.load") {
  const LoadSafety s = assess("evil/pt2_sympify_expr.pt2");
  INFO(describe(s));
  CHECK(mentions(s, "sympy.sympify would eval", LoadRisk::Dangerous));
  CHECK(s.worst() == LoadRisk::Dangerous);
  CHECK_FALSE(s.acceptance());
  CHECK(outcome(s, "torch.export.load") == "runs code");
  // Real dynamic shapes of PyTorch 2.13 (derived dims, .item(), symbolic floats, cond) pass.
  const LoadSafety real = assess_load_safety(*open_file_source(testdata("pt2/sym_exprs.pt2")));
  INFO(describe(real));
  CHECK_FALSE(real.unsafe());
}

TEST_CASE("load safety: guards_code and graph names that FX and ep.module() exec are dangerous") {
  const LoadSafety guards = assess("evil/pt2_guards_code.pt2");
  INFO(describe(guards));
  CHECK(mentions(guards, "guards_code that ep.module() would exec: '__import__", LoadRisk::Dangerous));
  CHECK_FALSE(mentions(guards, "L['x'].size()[0] <= 1024", LoadRisk::Dangerous));
  CHECK(outcome(guards, "torch.export.load") == "runs code");
  const LoadSafety name = assess("evil/pt2_placeholder_name.pt2");
  INFO(describe(name));
  CHECK(mentions(name, "names a graph value or attribute 'x=__import__", LoadRisk::Dangerous));
  CHECK(outcome(name, "torch.export.load") == "runs code");
  // JSON only Python reads (NaN, a lone surrogate, a 400-digit integer) is read and judged, not "damaged".
  const LoadSafety python_only = assess("evil/pt2_json_python_only.pt2");
  INFO(describe(python_only));
  CHECK(mentions(python_only, "sympy.sympify would eval", LoadRisk::Dangerous));
  // What sympify would compute for ever.
  for (const char* f : {"crafted/pt2_sympify_pow.pt2", "crafted/pt2_sympify_precision.pt2"}) {
    const LoadSafety s = assess(f);
    INFO(f << "\n" << describe(s));
    CHECK(s.unsafe());
    CHECK((mentions(s, "any time and memory", LoadRisk::Dangerous) ||
           mentions(s, "sympify computes that many digits", LoadRisk::Dangerous)));
  }
  // Real PyTorch 2.13 exports with guards, derived dims, unbacked sizes, nested inputs and nan/inf constants pass.
  // ... and attribute and input names in any script (self.线性, forward(self, 输入, café)), as Python allows.
  for (const char* f : {"pt2/guards_dim.pt2", "pt2/guards_derived.pt2", "pt2/guards_nested.pt2", "pt2/guards_unbacked.pt2",
                        "pt2/unicode_names.pt2"}) {
    const LoadSafety s = assess_load_safety(*open_file_source(testdata(f)));
    INFO(f << "\n" << describe(s));
    CHECK_FALSE(s.unsafe());
  }
}

TEST_CASE("load safety: AOTInductor code wherever the model's loader takes it from") {
  // data/constants/m.so: copied into model m's folder and loaded; no --allow-global covers it.
  LoadSafetyOptions mine;
  mine.allowed_globals = {"aoti.m"};
  for (const LoadSafetyOptions& o : {LoadSafetyOptions{}, mine}) {
    const LoadSafety s = assess("evil/aoti_constants_so.pt2", o);
    INFO(describe(s));
    CHECK(s.worst() == LoadRisk::Dangerous);
    CHECK(mentions(s, "outside model 'm''s folder", LoadRisk::Dangerous));
    CHECK(outcome(s, "torch.export.load") == "runs code");
  }
  // data/aotinductor/m2/m2.so matches model m's prefix data/aotinductor/m: aoti.m does not vouch for it.
  const LoadSafety sibling = assess("evil/aoti_sibling_prefix_so.pt2", mine);
  INFO(describe(sibling));
  CHECK(sibling.unsafe());
  CHECK(mentions(sibling, "aoti.m2", LoadRisk::Unlisted));
  CHECK_FALSE(mentions(sibling, "aoti.m", LoadRisk::Unlisted));
  mine.allowed_globals = {"aoti.m", "aoti.m2"};
  CHECK_FALSE(assess("evil/aoti_sibling_prefix_so.pt2", mine).unsafe());
  // A package PyTorch compiled: its own .so, allowed by name.
  LoadSafetyOptions model;
  model.allowed_globals = {"aoti.model"};
  CHECK_FALSE(assess_load_safety(*open_file_source(testdata("pt2/mlp_dynamic_aoti.pt2")), model).unsafe());
}

TEST_CASE("load safety: torch.export's layout before 2.6 is judged as torch.export.load's fallback reads it") {
  const LoadSafety s = assess("evil/pt2_legacy_zip_layout.pt2");
  INFO(describe(s));
  CHECK(mentions(s, "posix.system", LoadRisk::Dangerous));
  CHECK(outcome(s, "torch.export.load") == "runs code");
  const std::optional<LoadSafety> legacy =
      assess_legacy_export_load_safety(*open_file_source(testdata("loadsafety/evil/pt2_legacy_zip_layout.pt2")));
  REQUIRE(legacy);
  CHECK(legacy->unsafe());
  // Files in a top folder are no such layout.
  CHECK_FALSE(assess_legacy_export_load_safety(*open_file_source(testdata("pt2/mlp_dynamic.pt2"))));
}

TEST_CASE("pickle scan: a name imported over and over is listed once, its memory once") {
  // 100,000 STACK_GLOBALs of the same two 1,000-byte memoized strings.
  const std::string a(1000, 'm'), b(1000, 'n');
  const auto u4 = [](size_t n) { return std::string{char(n & 0xff), char((n >> 8) & 0xff), char(n >> 16), 0}; };
  std::string p = "\x80\x04X"s + u4(a.size()) + a + "q\x00X"s + u4(b.size()) + b + "q\x01" "00";
  for (int i = 0; i < 100000; ++i) p += "h\x00h\x01\x93" "0"s;
  p += "N.";
  const PickleScan scan = scan_pickle(p);
  CHECK(scan.complete);
  REQUIRE(scan.imports.size() == 1);
  CHECK(scan.imports[0].count == 100000);
  CHECK(scan.imports[0].full() == a + "." + b);

  // The archive of it: one finding, within a few MB (it took 388 MB).
  const LoadSafety flood = assess("crafted/import_flood.pt");
  CHECK(flood.unsafe());
  CHECK(flood.findings.size() == 1);
}

TEST_CASE("pickle scan: distinct calls are listed up to the limit, then an anomaly says so") {
  std::string p = "\x80\x02";
  for (int i = 0; i < 50; ++i) {
    const std::string name = "f" + std::to_string(i);
    p += "cm\n" + name + "\n)R0";
  }
  p += "N.";
  const PickleScan all = scan_pickle(p);
  CHECK(all.imports.size() == 50);
  CHECK(all.calls.size() == 50);
  CHECK(all.anomalies.empty());
  const PickleScan cut = scan_pickle(p, 0, 10);
  CHECK(cut.imports.size() + cut.calls.size() == 10);
  REQUIRE(cut.anomalies.size() == 1);
  CHECK(cut.anomalies[0].find("distinct imports and calls") != std::string::npos);
}

TEST_CASE("load safety: every hostile file of the corpus is unsafe") {
  size_t files = 0;
  for (const char* folder : {"loadsafety/evil", "loadsafety/crafted"}) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(testdata(folder))) {
      if (!e.is_regular_file()) continue;
      ++files;
      // Unsafe, or no loader reads anything of it (a tar that tarfile sees as empty).
      const auto source = open_file_source(e.path().string());
      const LoadSafety s = assess_load_safety(*source, {});
      INFO(e.path().string() << "\n" << describe(s));
      const bool nothing = detect_file_kind(*source) == FileKind::NotAModel && !looks_like_pickle(*source);
      CHECK((s.unsafe() || nothing));
    }
  }
  CHECK(files >= 50);
}

TEST_CASE("load safety: the legacy tar format is walked member by member, as torch.load reads it") {
  const auto kind = [](const std::string& rel) {
    return detect_file_kind(*open_file_source(testdata("loadsafety/" + rel)));
  };
  CHECK(kind("benign/tar_tensors.pt") == FileKind::LegacyTar);
  const LoadSafety benign = assess("benign/tar_tensors.pt");
  INFO(describe(benign));
  CHECK_FALSE(benign.unsafe());
  CHECK(benign.pickles.size() == 7);  // 2 + 2 in 'storages' (count, one storage, views), 3 in 'tensors', the object
  CHECK(outcome(benign, "torch.load(weights_only=True)") == "refuses");  // 2.6 and later refuse the format
  CHECK(outcome(benign, "torch.load(weights_only=False)") == "accepts");
  CHECK(outcome(benign, "pickle.load") == "refuses");
  LoadSafetyOptions old;
  old.torch_version = "1.13";
  CHECK(outcome(assess("benign/tar_tensors.pt", old), "torch.load(weights_only=True)") == "accepts");

  // Each pickle torch.load would run, found past the raw storage and tensor data before it.
  const std::pair<const char*, const char*> evil[] = {
      {"evil/tar_storages_system.pt", "'storages': the storage count"},
      {"evil/tar_storage_views_system.pt", "'storages': the storage views"},
      {"evil/tar_tensors_system.pt", "'tensors': tensor 1"},
      {"evil/tar_pickle_system.pt", "'pickle': the object"},
      {"evil/tar_v7_system.pt", "'pickle': the object"},
      {"crafted/tar_duplicate_pickle.pt", "'pickle': the object"},
      {"crafted/tar_pax_path.pt", "'pickle': the object"},
      {"crafted/tar_gnu_longname.pt", "'pickle': the object"}};
  for (const auto& [file, where] : evil) {
    const LoadSafety s = assess(file);
    INFO(file << "\n" << describe(s));
    bool found = false;
    for (const LoadFinding& f : s.findings) {
      found = found || (f.risk == LoadRisk::Dangerous && f.global == "os.system" && f.where.rfind(where, 0) == 0);
    }
    CHECK(found);
    CHECK(outcome(s, "torch.load(weights_only=False)") == "runs code");
    CHECK(outcome(assess(file, old), "torch.load(weights_only=True)") == "refuses");
  }
  // The tar header that is also a pickle: pickle.load runs it.
  const LoadSafety poly = assess("evil/tar_polyglot.pt");
  CHECK(outcome(poly, "pickle.load") == "runs code");
  CHECK(mentions(poly, "os.system", LoadRisk::Dangerous));
  CHECK(mentions(assess("crafted/tar_symlink_storages.pt"), "symbolic link", LoadRisk::Crafted));
}

TEST_CASE("load safety: a file is a pickle when pickle.load would do something with it") {
  const auto pickle = [](const std::string& bytes) { return looks_like_pickle(*make_memory_source(bytes)); };
  CHECK(pickle("\x80\x02K\x01."));
  CHECK(pickle("\x80\x02}(X\x01\x00\x00\x00" "aK"s));  // PROTO states a pickle: a damaged one is crafted
  CHECK(pickle("N0cos\nsystem\n(S'id'\ntR."));  // no PROTO, and not a container first: still a pickle
  CHECK(pickle("cos\nsystem\n(S'id'\ntRgarbage"));  // runs os.system, then fails
  CHECK_FALSE(pickle("config: 1\n"));                // GLOBAL never completes: nothing runs
  CHECK_FALSE(pickle("I love text\n"));
  CHECK_FALSE(pickle(std::string(600, '\0')));
  CHECK_FALSE(pickle("\x80\x07garbage"));  // no such protocol
  // A safetensors file whose header is 896 bytes starts 80 03, as a protocol 3 pickle; pickle.load
  // fails on its third byte before doing anything. It was judged a crafted pickle (exit 8).
  std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  header.resize(0x380, ' ');
  const std::string safetensors = std::string("\x80\x03\0\0\0\0\0\0", 8) + header + std::string(16, '\0');
  CHECK_FALSE(pickle(safetensors));
  CHECK(pickle("\x80\x03}q\x00(X\x01\x00\x00\x00aq\x01K\x01u0"s));  // fails past its start: damaged, or crafted
  // Random bytes that begin 80 0N (1 file in 11,000): pickle.load fails on the next opcode having done
  // nothing. A random blob in bench/sign.sh's model folder was refused as a crafted pickle (exit 8).
  CHECK_FALSE(pickle(safetensors.substr(0, 8) + "}"));
  CHECK_FALSE(pickle("\x80\x03\xad\x17\x9c\x01\xfe\x33\x81\x02\x10\x77"s));
  // EXT1 first (3 in 256 random files start with EXT1, EXT2 or EXT4): pickle.load looks the code up in
  // copyreg's extension registry, empty unless the loading program filled it, and fails there.
  CHECK_FALSE(pickle("\x82\xd5\xad\xa7\xef\x40\xe0\x75\x6c\x57"s));
  CHECK(pickle("cos\nsystem\n\x82\xd5(S'id'\ntR."s));  // an import before it: acts
  CHECK_FALSE(pickle("(lp0\nI1\na"));  // a damaged list: fails before doing anything
  // A pickle whose first string runs past the first MiB is read on.
  std::string big = "X" + std::string("\x00\x00\x20\x00", 4) + std::string(2u << 20, 'a') + "0cos\nsystem\n)R.";
  CHECK(pickle(big));
}

TEST_CASE("load safety: the verdict says what would accept a file, only when unlisted names are all") {
  const std::optional<LoadSafety::Acceptance> own = assess("evil/custom_class.pt").acceptance();
  REQUIRE(own);
  CHECK(own->allow_globals == std::vector<std::string>{"mymodel.Config"});
  CHECK_FALSE(own->load_library);
  const std::optional<LoadSafety::Acceptance> op = assess("evil/custom_op.pt").acceptance();
  REQUIRE(op);
  CHECK(op->load_library);
  CHECK_FALSE(assess("evil/reduce_system.pt").acceptance());     // dangerous: nothing accepts it
  CHECK_FALSE(assess("crafted/setitem_on_list.pt").acceptance()); // crafted
  CHECK_FALSE(assess("benign/tar_tensors.pt").acceptance());      // safe already
}

TEST_CASE("load safety: what each loader reads of a file is what is judged (scripts/make_testdata_loader_views.py)") {
  // torch.load reads a .pt2's data.pkl as a torch.save file.
  const LoadSafety data_pkl = assess("evil/view_pt2_data_pkl.pt2");
  INFO(describe(data_pkl));
  CHECK(mentions(data_pkl, "os.system", LoadRisk::Dangerous));
  CHECK(outcome(data_pkl, "torch.load(weights_only=False)") == "runs code");
  // torch.jit.load and torch.export.load find a ZIP by its end record, after a legacy or tar file.
  for (const char* f : {"evil/view_legacy_then_export_zip.pt2", "evil/view_legacy_then_jit_zip.pt",
                        "evil/view_tar_member_jit_zip.pt"}) {
    const LoadSafety s = assess(f);
    INFO(f << "\n" << describe(s));
    CHECK(mentions(s, "ends with a ZIP archive", LoadRisk::Crafted));
  }
  // libtorch finds CODE/ as code/, and data/sample_inputs/MODEL.pt as model.pt.
  CHECK(mentions(assess("evil/view_code_upper_case.pt"), "torch.save", LoadRisk::Dangerous));
  const LoadSafety sample = assess("evil/view_pt2_sample_inputs_upper_case.pt2");
  INFO(describe(sample));
  CHECK(mentions(sample, "os.system", LoadRisk::Dangerous));
  CHECK(mentions(sample, "libtorch's lookups ignore case", LoadRisk::Crafted));
}

TEST_CASE("pickle scan: a STOP inside a FRAME is an anomaly: readers disagree on where the pickle ends") {
  // PROTO 4, FRAME of 12 bytes: K 1 . then 9 bytes an unbuffered reader takes with the frame.
  const std::string p = "\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00" "K\x01." "\x80\x02K\x02.\x00\x00\x00\x00"s;
  const PickleScan scan = scan_pickle(p);
  REQUIRE(scan.complete);
  CHECK(scan.end == 14);
  REQUIRE(scan.anomalies.size() == 1);
  CHECK(scan.anomalies[0].find("STOP inside a FRAME") != std::string::npos);
  // A frame that ends with STOP, as pickle.dumps(protocol=4) writes it, is fine.
  const std::string ok = "\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00" "K\x01."s;
  CHECK(scan_pickle(ok).anomalies.empty());
}

TEST_CASE("load safety: a ZIP end record near the end of a legacy or pickle file is crafted, wherever miniz finds it") {
  const std::string pickle = "\x80\x02K\x01."s;
  for (size_t back : {size_t{22}, size_t{40000}, size_t{69000}}) {
    std::string file = pickle + std::string(80000, 'x');
    file.replace(file.size() - back, 4, "PK\x05\x06");
    const LoadSafety s = assess_load_safety(*make_memory_source(file, "x.pkl"));
    INFO(back << "\n" << describe(s));
    CHECK(mentions(s, "ends with a ZIP archive", LoadRisk::Crafted));
  }
}

TEST_CASE("load safety: second review's files (scripts/make_testdata_loader_views.py)") {
  for (const char* f : {"evil/view_legacy_then_zip_past_64k.pt", "evil/view_legacy_then_zip64_sizes.pt",
                        "evil/view_legacy_then_zip_directory_after_end.pt"}) {
    const LoadSafety s = assess(f);
    INFO(f << "\n" << describe(s));
    CHECK(mentions(s, "ends with a ZIP archive", LoadRisk::Crafted));
  }
  for (const char* f : {"crafted/view_tar_frame_past_stop.pt", "crafted/view_legacy_frame_past_stop.pth"}) {
    const LoadSafety s = assess(f);
    INFO(f << "\n" << describe(s));
    CHECK(mentions(s, "STOP inside a FRAME", LoadRisk::Crafted));
  }
  CHECK(outcome(assess("crafted/view_legacy_frame_past_stop.pth"), "torch.load(weights_only=True)") == "refuses");
}

TEST_CASE("load safety: third review's files: mobile bytecode, a .pt2 inside TorchScript, code/*.PY") {
  const LoadSafety save = assess("evil/view_ptl_bytecode_save.ptl");
  INFO(describe(save));
  CHECK(mentions(save, "torch.save", LoadRisk::Dangerous));
  CHECK(assess("evil/view_ptl_bytecode_custom_op.ptl").worst() >= LoadRisk::Unlisted);
  CHECK(mentions(assess("evil/view_pt2_plus_torchscript.pt2"), "a .pt2 as well", LoadRisk::Crafted));
  CHECK(mentions(assess("evil/view_code_upper_py.pt"), "torch.save", LoadRisk::Dangerous));
  // A real lite-interpreter archive names only libtorch's operators.
  CHECK_FALSE(assess_load_safety(*open_file_source(testdata("mlp.ptl"))).unsafe());
}

TEST_CASE("load safety: custom classes of TorchScript pickles, and constants.pkl as torch.load looks for it") {
  // __torch__.torch.classes.aten.OpaqueObject runs pickle.loads on its state (PyTorch 2.x).
  for (const char* f : {"evil/view_opaque_object_constants.pt", "evil/view_opaque_object_data.ptl",
                        "evil/view_opaque_object_custom_obj.pt2"}) {
    const LoadSafety s = assess(f);
    INFO(f << "\n" << describe(s));
    CHECK(mentions(s, "torch.classes.aten.OpaqueObject", LoadRisk::Dangerous));
  }
  // libtorch's own classes pass by exact name, not as the start of an attribute chain.
  const LoadSafety quantized = assess_load_safety(*open_file_source(testdata("quant_dynamic.pt")));
  INFO(describe(quantized));
  CHECK_FALSE(quantized.unsafe());
  // CONSTANTS.pkl: torch.jit.load finds it, torch.load does not and unpickles data.pkl with Python's pickle.
  const LoadSafety upper = assess("evil/view_constants_upper_case.pt");
  INFO(describe(upper));
  CHECK(mentions(upper, "looks for the exact name", LoadRisk::Crafted));
  CHECK(mentions(upper, "quantized.__getattr__.__builtins__.get", LoadRisk::Dangerous));  // data.pkl as torch.load reads it
  CHECK(outcome(upper, "torch.load(weights_only=False)") == "runs code");
  CHECK(outcome(upper, "torch.load(weights_only=True)") == "refuses");
}

TEST_CASE("pickle text: UNICODE and STRING operands decode as CPython's unpickler decodes them") {
  std::string why;
  // raw-unicode-escape: a byte is the code point of its value; \\u after an odd count of backslashes only.
  CHECK(decode_pickle_unicode("\xc3\xa9", &why) == "\xc3\x83\xc2\xa9");  // "Ã©", not "é"
  CHECK(decode_pickle_unicode("p\\u006fsix", &why) == "posix");
  CHECK(decode_pickle_unicode("\\\\u0041", &why) == "\\\\u0041");
  CHECK(decode_pickle_unicode("\\\\\\u0041", &why) == "\\\\A");
  CHECK(decode_pickle_unicode("\\U0001F600", &why) == "\xf0\x9f\x98\x80");
  CHECK(decode_pickle_unicode("\\x41", &why) == "\\x41");
  CHECK(decode_pickle_unicode("abc\\", &why) == "abc\\");
  for (const char* fails : {"\\u12", "\\U0000004", "\\U00110000", "\\ud800"}) {
    INFO(fails);
    CHECK_FALSE(decode_pickle_unicode(fails, &why));
  }
  // STRING: quoted, codecs.escape_decode, then torch.load's UTF-8.
  CHECK(decode_pickle_string("'p\\x6fsix'", &why) == "posix");
  CHECK(decode_pickle_string("\"a'b\"", &why) == "a'b");
  CHECK(decode_pickle_string("'\\12x\\\\\\''", &why) == "\nx\\'");
  CHECK(decode_pickle_string("'\xc3\xa9'", &why) == "\xc3\xa9");
  for (const char* fails : {"p", "'p", "'\\x6'", "'\\'", "'\\q'", "'\\400'", "'\\xff'", "'\xff'"}) {
    INFO(fails);
    CHECK_FALSE(decode_pickle_string(fails, &why));
  }
}

TEST_CASE("pickle scan and reader: a STACK_GLOBAL's names and a storage key are the decoded texts") {
  const PickleScan escaped = scan_pickle("\x80\x02S'p\\x6fsix'\nVsyst\\u0065m\n\x93)R."s);
  REQUIRE(escaped.complete);
  REQUIRE(escaped.imports.size() == 1);
  CHECK(escaped.imports[0].full() == "posix.system");
  // A text the unpickler fails on, or a lone surrogate, ends the scan: never a guess.
  CHECK_FALSE(scan_pickle("\x80\x02V\\ud800\nVx\n\x93."s).complete);
  CHECK_FALSE(scan_pickle("\x80\x02S'\\q'\n."s).complete);
  // The safe reader (model.cc's storages) reads the same texts.
  const PickleGraph g = parse_pickle("\x80\x02(V\xc3\xa9\nS'p\\x6fsix'\nX\x01\x00\x00\x00" "at."s, "test");
  const PickleNode& root = g.at(g.root());
  REQUIRE(root.kind == PickleKind::Tuple);
  REQUIRE(g.items(root).size() == 3);
  CHECK(g.string_at(g.items(root)[0]) == std::optional<std::string_view>("\xc3\x83\xc2\xa9"));
  CHECK(g.string_at(g.items(root)[1]) == std::optional<std::string_view>("posix"));
  CHECK(g.string_at(g.items(root)[2]) == std::optional<std::string_view>("a"));
  CHECK_THROWS_AS(parse_pickle("\x80\x02S'\\x6'\n."s, "test"), Error);
}

TEST_CASE("load safety: fifth review's files (scripts/make_testdata_loader_views.py)") {
  // A .pt2 graph's node targets are judged as code's operators are, sub-graphs and as_operator too.
  const LoadSafety from_file = assess("evil/view_pt2_graph_from_file.pt2");
  INFO(describe(from_file));
  CHECK(mentions(from_file, "torch.from_file", LoadRisk::Dangerous));
  CHECK(outcome(from_file, "torch.export.load") == "runs code");
  const LoadSafety targets = assess("crafted/view_pt2_graph_targets.pt2");
  INFO(describe(targets));
  CHECK(mentions(targets, "'torch.os.system'", LoadRisk::Crafted));
  CHECK(mentions(targets, "torch.ops.tsarchive_custom_ns", LoadRisk::Unlisted));
  // An AOTInductor model without a .so is compiled with a command from its flags files.
  const LoadSafety compiled = assess("evil/view_aoti_cpp_compile.pt2");
  INFO(describe(compiled));
  CHECK(mentions(compiled, "system()", LoadRisk::Dangerous));
  LoadSafetyOptions mine;
  mine.allowed_globals = {"aoti.model"};
  CHECK(assess("evil/view_aoti_cpp_compile.pt2", mine).worst() == LoadRisk::Dangerous);
  // STRING escapes are decoded: posix.system, which no --allow-global of the escaped name passes.
  LoadSafetyOptions escaped;
  escaped.allowed_globals = {"p\\x6fsix.system"};
  const LoadSafety escape = assess("evil/view_string_escape_global.pkl", escaped);
  INFO(describe(escape));
  CHECK(mentions(escape, "posix.system", LoadRisk::Dangerous));
  // A wildcard never allows a name part with a dot (mymodel + "os.system"); its exact name does.
  LoadSafetyOptions wildcard;
  wildcard.allowed_globals = {"mymodel.*"};
  const LoadSafety dotted = assess("evil/view_wildcard_dotted.pkl", wildcard);
  INFO(describe(dotted));
  CHECK(mentions(dotted, "mymodel.os.system", LoadRisk::Dangerous));
  wildcard.allowed_globals = {"mymodel.os.system"};
  CHECK_FALSE(assess("evil/view_wildcard_dotted.pkl", wildcard).unsafe());
  // UNICODE's Latin-1 key: torch.load reads data/Ã©; the data/é beside it is no storage of the pickle.
  const LoadSafety key = assess("crafted/view_unicode_latin1_key.pt");
  INFO(describe(key));
  CHECK(mentions(key, "no persistent id", LoadRisk::Crafted));
  CHECK_FALSE(mentions(key, "has no record", LoadRisk::Crafted));
  for (const LoadFinding& f : key.findings) CHECK(f.where == "data/\xc3\xa9");
}

namespace {
std::string loader_why(const LoadSafety& s, const std::string& loader) {
  for (const LoaderVerdict& v : s.loaders) {
    if (v.loader == loader) return v.why;
  }
  return "(none)";
}
LoadSafety assess_shape(const std::string& rel, const std::string& torch_version = "") {
  LoadSafetyOptions o;
  o.torch_version = torch_version;
  return assess_load_safety(*open_file_source(testdata("pickle_shapes/" + rel)), o);
}
}  // namespace

TEST_CASE("load safety: weights_only's refusal names what stops it first, in the order it reads the pickle") {
  // scripts/make_testdata_pickle_shapes.py --prove: PyTorch 2.13 and 1.13 both stop at
  // collections.defaultdict, which comes before __builtin__.list (first by name).
  for (const char* version : {"2.13", "1.13"}) {
    const LoadSafety dd = assess_shape("defaultdict_list.pt", version);
    CHECK(loader_why(dd, "torch.load(weights_only=True)") == "GLOBAL collections.defaultdict is not an allowed global");
    const LoadSafety config = assess_shape("config_cycle.pt", version);
    CHECK(loader_why(config, "torch.load(weights_only=True)") == "GLOBAL configlike.DictNode is not an allowed global");
  }
  // PyTorch 2 names a Python 2 name as it maps it; 1.13 maps none.
  CHECK(loader_why(assess_shape("dict_pairs.pt", "2.13"), "torch.load(weights_only=True)") ==
        "GLOBAL builtins.dict is not an allowed global");
  CHECK(loader_why(assess_shape("dict_pairs.pt", "1.13"), "torch.load(weights_only=True)") ==
        "GLOBAL __builtin__.dict is not an allowed global");
  // An opcode outside the set stops it where it comes: after the GLOBAL here, before it in a protocol 5 file.
  const std::string global_first = "\x80\x02" "cmymodel\nConfig\n)R\x8c\x01x\x86."s;
  const LoadSafety g = assess_load_safety(*make_memory_source(global_first, "x.pkl"));
  CHECK(loader_why(g, "torch.load(weights_only=True)") == "GLOBAL mymodel.Config is not an allowed global");
  CHECK(loader_why(assess_shape("numpy_protocol5_2_13.pt"), "torch.load(weights_only=True)") ==
        "opcode FRAME is not in its opcode set (a protocol 5 pickle)");
  // The lpips-like OrderedDict of pairs is what weights_only accepts.
  CHECK(outcome(assess_shape("ordereddict_pairs.pth"), "torch.load(weights_only=True)") == "accepts");
}

TEST_CASE("load safety: libtorch's own custom classes and operator namespaces need no library") {
  // A scripted module that uses record_function holds torch.classes.profiler._RecordFunction (1.13 and 2.13).
  for (const char* f : {"record_function_2_13.pt", "record_function_1_13.pt"}) {
    const LoadSafety s = assess_shape(f);
    INFO(f << "\n" << describe(s));
    CHECK_FALSE(s.unsafe());
    CHECK(outcome(s, "torch.jit.load") == "accepts");
  }
  // _c10d_functional and symm_mem are 2.x's libtorch's; 1.13's libtorch has neither, so a library would.
  const LoadSafety two = assess_shape("distributed_ops_2_13.pt");
  INFO(describe(two));
  CHECK_FALSE(two.unsafe());
  const LoadSafety old = assess_shape("distributed_ops_2_13.pt", "1.13");
  CHECK(mentions(old, "torch.ops._c10d_functional", LoadRisk::Unlisted));
  CHECK(mentions(old, "torch.ops.symm_mem", LoadRisk::Unlisted));
}

TEST_CASE("load safety: numpy arrays at pickle protocol 5 (numeric._frombuffer) are benign") {
  for (const char* f : {"numpy_protocol5_2_13.pt", "numpy_protocol5_1_13.pt"}) {
    const LoadSafety s = assess_shape(f);
    INFO(f << "\n" << describe(s));
    CHECK_FALSE(s.unsafe());
  }
  CHECK(is_benign_global("numpy._core.numeric._frombuffer"));
  CHECK(is_benign_global("numpy.core.numeric._frombuffer"));
  CHECK_FALSE(is_benign_global("numpy._core.numeric.frombuffer"));
}

TEST_CASE("load safety: a torch.save file that is a torch.package too gets PackageImporter's verdict") {
  // PackageImporter needs only .data/extern_modules: load_pickle imports and runs evilmod.py,
  // while torch.load reads the same file's data.pkl, a tensor dict.
  const LoadSafety both = assess("evil/package_beside_torch_save.pt");
  INFO(describe(both));
  CHECK(outcome(both, "torch.load(weights_only=True)") == "accepts");
  CHECK(outcome(both, "torch.package.PackageImporter") == "runs code");
  CHECK(mentions(both, "a torch.package as well", LoadRisk::Dangerous));
  CHECK(mentions(both, "evilmod", LoadRisk::Dangerous));
  CHECK(both.unsafe());
  // A real torch.save file (no extern_modules) gets no PackageImporter row.
  const LoadSafety saved = assess("benign/torch2_13/state_dict.pth");
  CHECK(outcome(saved, "torch.package.PackageImporter") == "(none)");
  CHECK_FALSE(saved.unsafe());
}

TEST_CASE("load safety: a ZIP refused for names a loader still reads is crafted, not damaged") {
  const auto refused = [](const std::string& rel) {
    const auto source = open_file_source(testdata(rel));
    CHECK_THROWS_AS(TorchArchive(borrow_source(*source)), Error);  // the ZIP checks still refuse it
    return assess_refused_zip_names(*source);
  };
  // AOTIModelPackageLoader extracts data/aotinductor/ records to <tmp>/<name> without resolving '..'.
  const auto aoti = refused("loadsafety/crafted/zip_aoti_traversal.pt2");
  REQUIRE(aoti);
  INFO(describe(aoti->safety));
  CHECK(aoti->kind == FileKind::ExportedProgram);
  CHECK(mentions(aoti->safety, "AOTIModelPackageLoader", LoadRisk::Crafted));
  CHECK(mentions(aoti->safety, "<its temporary folder>/../tsarchive_marker_zip_aoti_traversal", LoadRisk::Crafted));
  // torch.export's layout before 2.6, read by Python's zipfile: a name cut at its NUL, the last of two names.
  const auto nul = refused("loadsafety/crafted/zip_legacy_nul_name.pt2");
  REQUIRE(nul);
  CHECK(nul->kind == FileKind::ExportedProgram);
  CHECK(mentions(nul->safety, "reads this record as 'serialized_state_dict.pt'", LoadRisk::Crafted));
  CHECK(nul->safety.findings.front().where == "serialized_state_dict.pt\\0Z");
  const auto dup = refused("loadsafety/crafted/zip_legacy_dup_name.pt2");
  REQUIRE(dup);
  CHECK(mentions(dup->safety, "is the name of 2 entries", LoadRisk::Crafted));
  CHECK_THAT(dup->safety.findings.front().attacks, Catch::Contains("torch.export.load"));
  // In PyTorch's own layout too: miniz and zipfile read one of the twins.
  const auto twins = refused("hostile/duplicate_data_pkl.pt");
  REQUIRE(twins);
  CHECK(twins->kind == FileKind::TorchScript);
  // Damage that no loader reads past stays damage: nothing here.
  CHECK_FALSE(refused("hostile/cd_offset_past_end.pt"));
  CHECK_FALSE(refused("hostile/comment_is_archive.pt"));
}

TEST_CASE("load safety: a GraphModule's reduce_graph_module runs code from the file; pathlib's paths are values") {
  // scripts/make_testdata_pickle_shapes.py (review 55c): torch.save of torch.fx.symbolic_trace(Net()).
  const LoadSafety fx = assess_shape("fx_graph_module_2_13.pt");
  INFO(describe(fx));
  CHECK(mentions(fx, "torch.fx.graph_module.reduce_graph_module", LoadRisk::Dangerous));
  // A wildcard does not accept what the table calls dangerous; the exact name does.
  LoadSafetyOptions o;
  o.allowed_globals = {"torch.fx.*", "torch.nn.modules.*", "torch.fx._symbolic_trace.Tracer", "__builtin__.set"};
  CHECK(mentions(assess_load_safety(*open_file_source(testdata("pickle_shapes/fx_graph_module_2_13.pt")), o),
                 "torch.fx.graph_module.reduce_graph_module", LoadRisk::Dangerous));
  o.allowed_globals.push_back("torch.fx.graph_module.reduce_graph_module");
  CHECK_FALSE(mentions(assess_load_safety(*open_file_source(testdata("pickle_shapes/fx_graph_module_2_13.pt")), o),
                       "torch.fx.graph_module.reduce_graph_module", LoadRisk::Dangerous));

  // A Lightning-style checkpoint holding pathlib.PosixPath('/tmp/x'): no file I/O, still not on weights_only's list.
  const LoadSafety path = assess_shape("pathlib_2_13.pt");
  INFO(describe(path));
  CHECK(mentions(path, "pathlib.PosixPath", LoadRisk::Unlisted));
  CHECK_FALSE(mentions(path, "pathlib.PosixPath", LoadRisk::Dangerous));
  CHECK(path.worst() == LoadRisk::Unlisted);
  CHECK(outcome(path, "torch.load(weights_only=True)") == "refuses");
  CHECK(dangerous_category("pathlib.Path") == "");
  CHECK(dangerous_category("pathlib.os") == "file I/O");
}

TEST_CASE("load safety: a pickle the end of the file cuts short is damage, unless what it ran is unsafe") {
  // pickle_cut.pkl: a protocol 2 pickle cut inside an operand; legacy_cut_in_pickle.pth: a legacy
  // torch.save stream cut inside its pickles. PyTorch: "pickle data was truncated".
  for (const char* f : {"pickle_cut.pkl", "legacy_cut_in_pickle.pth"}) {
    const LoadSafety s = assess_shape(f);
    INFO(f << "\n" << describe(s));
    CHECK_FALSE(s.unsafe());
    REQUIRE(s.damage.size() == 1);
    CHECK_THAT(s.damage.front(), Catch::Contains("cut short"));
  }
  // posix.system imported before the cut: pickle.load imports it before it fails.
  using namespace std::string_literals;
  TempDir dir;
  const std::string path = (dir.path / "cut.pkl").string();
  std::ofstream(path, std::ios::binary) << "\x80\x02" "cposix\nsystem\nX\x02\x00\x00\x00i"s;
  const LoadSafety cut = assess_load_safety(*open_file_source(path));
  INFO(describe(cut));
  CHECK(mentions(cut, "posix.system", LoadRisk::Dangerous));
  CHECK(cut.damage.size() == 1);
  // Cut inside a ZIP record whose CRC-32 matches is no interrupted download: crafted, as before.
  const LoadSafety zip = assess_load_safety(*open_file_source(testdata("hostile/pkl_truncated.pt")));
  CHECK(zip.worst() == LoadRisk::Crafted);
}
