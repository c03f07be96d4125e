#include "serve/service.h"

#include <pthread.h>
#include <signal.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "core/edit/extra.h"
#include "core/edit/file_edit.h"
#include "core/inputs/input_values.h"
#include "core/inputs/run_check.h"
#include "operations/gate.h"
#include "operations/opened_archive.h"
#include "serve/http.h"
#include "serve/v2.h"

namespace tsarchive::serve {
namespace {

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  }
  return true;
}

// Blocks the stop signals in this thread and the threads it starts (the
// signal thread takes them with sigwait); restores the mask when it ends.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, sig);
    ::pthread_sigmask(SIG_BLOCK, &set_, &saved_);
  }
  ~StopSignals() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  const sigset_t& set() const { return set_; }

 private:
  sigset_t set_{}, saved_{};
};

// Shapes from the archive's recorded self-check (run --record), by input and
// output name, when it has one for the served method. A check that does not
// read only costs the shapes (--ready-check reports it).
std::map<std::string, std::vector<int64_t>> recorded_shapes(const TorchArchive& archive, const std::string& method,
                                                            const std::string& file) {
  std::map<std::string, std::vector<int64_t>> shapes;
  if (archive.find(extra_record_name(kRunCheckName)) == nullptr) return shapes;
  RunCheck check;
  try {
    check = parse_run_check(read_extra(archive, kRunCheckName, 1 << 20), file);
  } catch (const Error&) {
    return shapes;
  }
  if (check.method != method) return shapes;
  for (const auto* lines : {&check.inputs, &check.outputs}) {
    for (const std::string& line : *lines) {
      if (auto shape = recorded_shape(line)) shapes.insert(std::move(*shape));
    }
  }
  return shapes;
}

// --ready-check: the archive's recorded check replayed in a one-shot worker
// on the served device, before any model is served. Error(CheckFailed) when
// it fails; true when it ran, false when the archive records none.
bool run_ready_check(const CheckedArchive& checked, const ServiceSettings& opts, const ModelSpec& spec,
                     const std::string& path, const NoteSink& notes) {
  if (checked.archive().find(extra_record_name(kRunCheckName)) == nullptr) return false;
  RunRequest request;
  request.archive = spec.request.archive;
  request.display_name = path;
  request.device = opts.device;
  request.threads = opts.threads;
  request.libraries = opts.worker.libraries;
  request.lite = spec.request.lite;
  InputBudget budget = input_budget(opts.worker);
  const RunCheck recorded = load_recorded_check(checked.archive(), request, path, budget);
  if (recorded.method != opts.method) {
    throw_usage("the recorded check of " + path + " calls " + recorded.method + ", not the served --method " + opts.method,
                "serve --method " + recorded.method + ", or leave out --ready-check");
  }
  request.tolerance = recorded.tolerance;
  request.tolerance_by_path = recorded.tolerance_by_path;
  WorkerJob job = worker_job(opts.worker, checked, "running its recorded check", notes);
  job.cuda = is_cuda_device(request.device);
  const RunReport report = in_worker<RunReport>(job, [&](TorchBackend& torch) { return torch.run(request); });
  for (const OutputCheck& c : report.checks) {
    if (c.passed) continue;
    throw Error(ErrorKind::CheckFailed,
                "model '" + spec.name + "' failed its recorded self-check, nothing was served: " + c.path + ": " + check_text(c),
                path, "see 'tsarchive run " + path + " --check'");
  }
  if (report.nonfinite() > 0) {
    throw Error(ErrorKind::CheckFailed,
                "model '" + spec.name + "' failed its recorded self-check, nothing was served: its outputs hold NaN or Inf",
                path, "see 'tsarchive run " + path + " --check'");
  }
  return true;
}

// settings.verify: verify's checks and verdict on the descriptor the model is
// served from (no window between the check and the load, as a `verify` run
// before `serve` would leave). Anything but a pass stops serve with verify's
// first finding and its exit status.
void verify_served(VerifySettings settings, const std::string& name, const std::string& path, const ArchiveFile& file,
                   const ServiceLog& log) {
  settings.model = path;
  const VerifyResult result = verify_opened(settings, file, log.note);
  if (result.exit_code != 0) {
    if (!result.findings.empty()) throw result.findings.front();
    throw Error(static_cast<ErrorKind>(result.exit_code), "verify refused the model", path,
                "see 'tsarchive verify " + path + "'");
  }
  const std::optional<SignatureCheck>& signature = result.signature.check;
  log.status("model '" + name + "' verified" +
             (signature ? ": signed by " + signer_text(*signature) : std::string(": intact")) +
             (result.report && result.report->stamp ? ", matches its stamp" : ""));
}

// One served model from its argument (NAME=PATH, or PATH served under its
// file's stem): opened, locked and kept open in `files`, past the gate, and
// with --ready-check its recorded check replayed.
ModelSpec model_spec(const std::string& arg, const ServiceSettings& opts, const std::vector<ModelSpec>& specs,
                     std::vector<std::unique_ptr<OpenedArchive>>& files, const ServiceLog& log) {
  std::string name, path = arg;
  if (const size_t eq = arg.find('='); eq != std::string::npos) {
    name = arg.substr(0, eq);
    path = arg.substr(eq + 1);
  } else {
    name = path.substr(path.rfind('/') + 1);
    name = name.substr(0, name.find('.'));
  }
  if (!valid_name(name)) {
    throw_usage("model name '" + name.substr(0, 60) + "' is not letters, digits, '_', '-' and '.'",
                "name it: tsarchive serve NAME=PATH");
  }
  for (const ModelSpec& other : specs) {
    if (other.name == name) throw_usage("two models are named '" + name + "'", "name them: tsarchive serve A=PATH B=PATH");
  }
  files.push_back(std::make_unique<OpenedArchive>(path, FileAccess::ReadHeld, kReaderLockTimeout, "cannot serve this file", log.note));
  const OpenedArchive& opened = *files.back();
  const TorchArchive* archive = &opened.archive();
  const CheckedArchive checked = pass_gate(opened, opts.worker, "nothing was served", log.note);
  if (opts.verify) verify_served(*opts.verify, name, path, opened.file(), log);
  ModelSpec spec;
  spec.name = name;
  spec.job = worker_job(opts.worker, checked, "serving " + opts.method, log.note);
  spec.request.archive = checked.libtorch_path();
  spec.request.display_name = path;
  spec.request.method = opts.method;
  spec.request.device = opts.device;
  spec.request.threads = opts.threads;
  spec.request.libraries = opts.worker.libraries;
  spec.request.lite = archive->kind() == FileKind::LiteInterpreter;
  spec.request.sample = opts.sample;
  spec.request.model_id = name;
  spec.instances = opts.instances;
  spec.recorded_shapes = recorded_shapes(*archive, opts.method, path);
  if (opts.ready_check) {
    if (run_ready_check(checked, opts, spec, path, log.note)) {
      log.status("model '" + name + "' passed its recorded self-check");
    } else {
      log.warning("model '" + name + "' has no recorded self-check to run (record one with run --record)", path);
    }
  }
  return spec;
}

// A stop signal: stop accepting, then let the requests in flight and
// queued finish; what is left when --grace ends gets 503, queued or running
// (its worker is killed, and not restarted).
void serve_until_stopped(InferenceServer& server, HttpServer& http, const StopSignals& signals,
                         int grace_ms, const LogLine& warn) {
  std::mutex served_mutex;
  std::condition_variable served_cv;
  bool served = false;
  std::thread stopper([&] {
    int sig = 0;
    ::sigwait(&signals.set(), &sig);
    http.stop();
    std::unique_lock<std::mutex> lock(served_mutex);
    if (!served_cv.wait_for(lock, std::chrono::milliseconds(grace_ms), [&] { return served; })) {
      warn("the requests in flight did not finish within --grace (" + std::to_string(grace_ms) +
           " ms); the rest are failed");
      server.abort();
    }
  });
  http.serve();  // returns once stopped and every connection has finished
  {
    std::lock_guard<std::mutex> lock(served_mutex);
    served = true;
  }
  served_cv.notify_all();
  stopper.join();
  server.stop();
}

}  // namespace

int serve_models(const ServiceSettings& opts, const ServiceLog& log) {
  if (opts.batch.max_wait_ms > 0 && opts.batch.max_batch <= 1) {
    throw_usage("--max-wait needs --max-batch above 1", "e.g. --max-batch 8 --max-wait 5");
  }
  std::vector<std::unique_ptr<OpenedArchive>> files;
  std::vector<ModelSpec> specs;
  for (const std::string& arg : opts.models) specs.push_back(model_spec(arg, opts, specs, files, log));

  HttpServerOptions http_options;
  http_options.host = opts.host;
  http_options.port = opts.port;
  http_options.limits.max_body_bytes = parse_memory_size(opts.max_body, "--max-body");
  http_options.max_inflight_bytes = parse_memory_size(opts.max_inflight, "--max-inflight-bytes");
  http_options.header_timeout_ms = opts.header_timeout_ms;
  http_options.read_timeout_ms = opts.read_timeout_ms;
  http_options.idle_timeout_ms = opts.idle_timeout_ms;
  http_options.max_connections = opts.max_connections;
  http_options.max_connections_per_client =
      opts.max_connections_per_client >= 0 ? opts.max_connections_per_client : std::max(1, opts.max_connections / 2);
  const uint64_t max_response = parse_memory_size(opts.max_response, "--max-response");

  ::signal(SIGPIPE, SIG_IGN);  // a client that goes away is a failed send, not the end
  StopSignals signals;
  std::mutex log_mutex;
  const LogLine warn = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    log.warning(line, {});
  };
  InferenceServer server(std::move(specs), opts.batch, "/proc/self/exe", warn, max_response);
  HttpServer http(http_options, [&server](HttpRequest& r) { return server.handle(r); });
  server.start();

  std::string line = "tsarchive serve: http://" + (opts.host.find(':') != std::string::npos ? "[" + opts.host + "]" : opts.host) +
                     ":" + std::to_string(http.port()) + "/v2";
  for (const auto& model : server.models()) {
    const ServedModelInfo info = model->info();
    line += "  " + model->name() + ": " + info.schema + " on " + info.device;
  }
  {
    std::lock_guard<std::mutex> lock(log_mutex);
    log.listening(line);
  }

  serve_until_stopped(server, http, signals, opts.grace_ms, warn);
  return 0;
}


}  // namespace tsarchive::serve
