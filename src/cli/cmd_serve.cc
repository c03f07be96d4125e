// tsarchive serve MODEL... [--host H] [--port P] [--method NAME] [--device DEV] [--threads N]
//                 [--max-batch N] [--max-wait MS] [--max-queue N] [--timeout MS]
//                 [--instances K] [--grace MS] [--sample P] [--ready-check]
//                 [--max-body SIZE] [--max-response SIZE] [--max-inflight-bytes SIZE]
//                 [--header-timeout MS] [--read-timeout MS] [--max-connections N]
//                 [--memory-limit SIZE] [--time-limit S]
//                 [--no-validate] [--load-library LIB]...
//
// Every archive passes the gate (gate.h) first and stays open and locked;
// each model's worker (worker/model_worker.h) loads it by descriptor. The
// server (serve/server.h) answers the Open Inference Protocol until SIGTERM
// or SIGINT, then stops accepting, finishes the requests in flight and
// queued within --grace, and exits 0.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/gate.h"
#include "cli/opened_archive.h"
#include "cli/output.h"
#include "cli/report_run.h"
#include "cli/run_options.h"
#include "cli/worker_options.h"
#include "core/extra.h"
#include "core/file_edit.h"
#include "core/run_check.h"
#include "serve/http.h"
#include "serve/server.h"
#include "serve/v2.h"

namespace tsarchive::cli {
namespace {

struct ServeOptions {
  std::vector<std::string> models;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string method = "forward";
  std::string device = "cpu";
  int threads = 0;
  serve::BatchOptions batch;
  std::string max_body = "64M";
  std::string max_response = "64M";
  std::string max_inflight = "1G";
  int header_timeout_ms = 10000;
  int read_timeout_ms = 10000;
  int max_connections = 256;
  int instances = 1;
  int grace_ms = 30000;
  double sample = 0;
  bool ready_check = false;
  WorkerOptions worker;
};

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
      if (auto shape = serve::recorded_shape(line)) shapes.insert(std::move(*shape));
    }
  }
  return shapes;
}

// --ready-check: the archive's recorded check replayed in a one-shot worker
// on the served device, before any model is served. Error(CheckFailed) when
// it fails; true when it ran, false when the archive records none.
bool run_ready_check(const CheckedArchive& checked, const ServeOptions& opts, const serve::ModelSpec& spec,
                     const std::string& path, std::ostream& err) {
  if (checked.archive().find(extra_record_name(kRunCheckName)) == nullptr) return false;
  RunRequest request;
  request.archive = spec.request.archive;
  request.display_name = path;
  request.device = opts.device;
  request.threads = opts.threads;
  request.libraries = opts.worker.libraries;
  request.lite = spec.request.lite;
  const RunCheck recorded = load_recorded_check(checked.archive(), request, path);
  if (recorded.method != opts.method) {
    throw_usage("the recorded check of " + path + " calls " + recorded.method + ", not the served --method " + opts.method,
                "serve --method " + recorded.method + ", or leave out --ready-check");
  }
  request.tolerance = recorded.tolerance;
  request.tolerance_by_path = recorded.tolerance_by_path;
  WorkerJob job = worker_job(opts.worker, checked, "running its recorded check", err);
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

// One served model from its argument (NAME=PATH, or PATH served under its
// file's stem): opened, locked and kept open in `files`, past the gate, and
// with --ready-check its recorded check replayed.
serve::ModelSpec model_spec(const std::string& arg, const ServeOptions& opts, const std::vector<serve::ModelSpec>& specs,
                            std::vector<std::unique_ptr<OpenedArchive>>& files, Context& ctx) {
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
  for (const serve::ModelSpec& other : specs) {
    if (other.name == name) throw_usage("two models are named '" + name + "'", "name them: tsarchive serve A=PATH B=PATH");
  }
  files.push_back(std::make_unique<OpenedArchive>(path, FileAccess::Read, kReaderLockTimeout, "cannot serve this file", ctx));
  const OpenedArchive& opened = *files.back();
  const TorchArchive* archive = &opened.archive();
  const CheckedArchive checked = pass_gate(opened, opts.worker, "nothing was served", ctx.err);
  serve::ModelSpec spec;
  spec.name = name;
  spec.job = worker_job(opts.worker, checked, "serving " + opts.method, ctx.err);
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
    if (run_ready_check(checked, opts, spec, path, ctx.err)) {
      ctx.err << "tsarchive serve: model '" << name << "' passed its recorded self-check" << std::endl;
    } else {
      print_warning(ctx.err, "model '" + name + "' has no recorded self-check to run (record one with run --record)", path);
    }
  }
  return spec;
}

// A stop signal: stop accepting, then let the requests in flight and
// queued finish; what is left when --grace ends gets 503 (queued) or 500
// (running: its worker is killed).
void serve_until_stopped(serve::InferenceServer& server, serve::HttpServer& http, const StopSignals& signals,
                         int grace_ms, const serve::LogLine& warn) {
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

int run_serve(const ServeOptions& opts, Context& ctx) {
  if (opts.batch.max_wait_ms > 0 && opts.batch.max_batch <= 1) {
    throw_usage("--max-wait needs --max-batch above 1", "e.g. --max-batch 8 --max-wait 5");
  }
  std::vector<std::unique_ptr<OpenedArchive>> files;
  std::vector<serve::ModelSpec> specs;
  for (const std::string& arg : opts.models) specs.push_back(model_spec(arg, opts, specs, files, ctx));

  serve::HttpServerOptions http_options;
  http_options.host = opts.host;
  http_options.port = opts.port;
  http_options.limits.max_body_bytes = parse_memory_size(opts.max_body, "--max-body");
  http_options.max_inflight_bytes = parse_memory_size(opts.max_inflight, "--max-inflight-bytes");
  http_options.header_timeout_ms = opts.header_timeout_ms;
  http_options.read_timeout_ms = opts.read_timeout_ms;
  http_options.max_connections = opts.max_connections;
  const uint64_t max_response = parse_memory_size(opts.max_response, "--max-response");

  ::signal(SIGPIPE, SIG_IGN);  // a client that goes away is a failed send, not the end
  StopSignals signals;
  std::mutex log_mutex;
  const serve::LogLine warn = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    print_warning(ctx.err, line, {});
    ctx.err.flush();
  };
  serve::InferenceServer server(std::move(specs), opts.batch, "/proc/self/exe", warn, max_response);
  serve::HttpServer http(http_options, [&server](const serve::HttpRequest& r) { return server.handle(r); });
  server.start();

  std::string line = "tsarchive serve: http://" + (opts.host.find(':') != std::string::npos ? "[" + opts.host + "]" : opts.host) +
                     ":" + std::to_string(http.port()) + "/v2";
  for (const auto& model : server.models()) {
    const ServedModelInfo info = model->info();
    line += "  " + model->name() + ": " + info.schema + " on " + info.device;
  }
  {
    std::lock_guard<std::mutex> lock(log_mutex);
    ctx.out << line << std::endl;
  }

  serve_until_stopped(server, http, signals, opts.grace_ms, warn);
  return 0;
}

}  // namespace

Runner setup_serve(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<ServeOptions>();
  app.description(
      "Serve archives over HTTP with the Open Inference Protocol (KServe v2), which Triton, KServe and\n"
      "MLServer clients speak. Each archive passes verify's checks, then loads in --instances libtorch\n"
      "worker processes that take requests from the model's queue; a worker that dies fails its requests\n"
      "with 500 and is restarted with back-off (readiness is false until it is back). The tsarchive process\n"
      "itself never loads libtorch.\n"
      "\n"
      "Endpoints: GET /v2/health/live, /v2/health/ready, /v2, /v2/models/NAME, /v2/models/NAME/ready;\n"
      "POST /v2/models/NAME/infer with JSON tensors (BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, BF16,\n"
      "FP32, FP64), named as the method's parameters, or binary (Inference-Header-Content-Length, the\n"
      "binary tensor data extension; outputs too when asked with binary_data).\n"
      "A non-tensor parameter (int, float, bool, str, lists, dicts, Optional) is an entry of the\n"
      "request's \"parameters\" converted as run's json: values ({\"parameters\": {\"scale\": 0.5}}), or\n"
      "an input holding one value (a str: one BYTES string; a list: a 1-D tensor); left out, its\n"
      "default applies.\n"
      "Outputs are named out, or out[0], out[1], ...\n"
      "Model metadata gives shapes from the archive's recorded self-check (run --record), -1 for the\n"
      "batch dimension; [-1] without one. GET /metrics: Prometheus text (requests by model and status;\n"
      "request, queue and compute latency and batch-size histograms; queue depth; readiness; worker\n"
      "restarts; with --sample, operator calls, self and total time, and API usage keys).\n"
      "Statuses: 400 bad request or inputs that do not fit the model, 404 unknown model or path, 405 wrong\n"
      "method, 408 headers not sent in --header-timeout or body in --read-timeout, 411 no Content-Length\n"
      "(chunked bodies are refused), 413 body over --max-body or a request larger than\n"
      "--max-inflight-bytes, 431 headers over 16 KiB, 500 the worker died or the response is over\n"
      "--max-response, 503 not ready, queue full, --max-inflight-bytes or --max-connections in use, or\n"
      "shutting down (Retry-After), 504 past --timeout. Errors are {\"error\": \"...\"}.\n"
      "\n"
      "One line on stdout when it serves: the URL, and each model's signature. SIGTERM or SIGINT: stop\n"
      "accepting, finish the requests in flight and queued within --grace, exit 0.");
  app.add_option("model", opts->models, "Archives to serve: PATH (named after its file, mlp for mlp.pt) or NAME=PATH")
      ->required();
  app.add_option("--host", opts->host, "Address to listen on (default 127.0.0.1; 0.0.0.0 or :: for every interface)");
  app.add_option("--port", opts->port, "Port (default 8000; 0: any free port, printed in the start line)")
      ->check(CLI::Range(0, 65535));
  app.add_option("-m,--method", opts->method, "Method each infer calls (default: forward)");
  app.add_option("--device", opts->device, "cpu, cuda or cuda:N (default: cpu)");
  app.add_option("--threads", opts->threads, "Intra-op threads per worker (default: libtorch's choice)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--max-batch", opts->batch.max_batch,
                 "Run up to N rows of queued requests as one call, stacked on dimension 0 (default 1: no batching)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-wait", opts->batch.max_wait_ms, "Milliseconds a batch waits for more requests (default 0)")
      ->check(CLI::Range(0, 60000));
  app.add_option("--max-queue", opts->batch.max_queue, "Queued requests per model; beyond: 503 with Retry-After (default 64)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--timeout", opts->batch.timeout_ms,
                 "Milliseconds from a request's last byte until it runs, parsing and queueing; beyond: 504 without\n"
                 "running (default 0: no limit)")
      ->check(CLI::Range(0, 86400000));
  app.add_option("--instances", opts->instances,
                 "Worker processes per model, each a copy of it taking requests from the model's queue (default 1)")
      ->check(CLI::Range(1, 64));
  app.add_option("--grace", opts->grace_ms,
                 "After SIGTERM or SIGINT, milliseconds to finish requests in flight and queued (default 30000)")
      ->check(CLI::Range(0, 3600000));
  app.add_option("--sample", opts->sample,
                 "Observe operator calls with probability P in (0, 1] (e.g. 0.01): /metrics then gives each model's\n"
                 "operator calls, self and total time, and libtorch's API usage keys (default: off)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--ready-check", opts->ready_check,
               "Before serving, replay each archive's recorded self-check (run --record) on --device; one that\n"
               "fails ends the command (exit 1); one without a check is served and a line says so");
  app.add_option("--max-body", opts->max_body, "Largest request body (default 64M); beyond: 413");
  app.add_option("--max-response", opts->max_response,
                 "Largest infer response (default 64M); beyond: 500 naming this option (binary outputs are smaller)")
      ->type_name("SIZE");
  app.add_option("--max-inflight-bytes", opts->max_inflight,
                 "Bytes all requests together may hold: bodies being read, parsed JSON and tensors, responses\n"
                 "(default 1G); a request that does not fit beside the others: 503 with Retry-After; one larger\n"
                 "than this alone: 413. A JSON body takes up to about 25 times its size while parsed")
      ->type_name("SIZE");
  app.add_option("--header-timeout", opts->header_timeout_ms,
                 "Milliseconds from accepting a connection (a later request: from its first byte) to the end of\n"
                 "the request's headers (default 10000); beyond: 408")
      ->check(CLI::Range(1, 3600000));
  app.add_option("--read-timeout", opts->read_timeout_ms,
                 "Milliseconds from the end of a request's headers to the end of its body (default 10000);\n"
                 "beyond: 408")
      ->check(CLI::Range(1, 3600000));
  app.add_option("--max-connections", opts->max_connections,
                 "Open connections at once (default 256); beyond: 503 and close")
      ->check(CLI::Range(1, 1 << 20));
  add_worker_options(app, opts->worker, true);
  return [opts, &ctx] { return run_serve(*opts, ctx); };
}

}  // namespace tsarchive::cli
