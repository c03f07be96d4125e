// tsarchive serve MODEL... [--host H] [--port P] [--method NAME] [--device DEV] [--threads N]
//                 [--max-batch N] [--max-wait MS] [--max-queue N] [--timeout MS]
//                 [--max-body SIZE] [--read-timeout MS] [--memory-limit SIZE] [--time-limit S]
//                 [--no-validate] [--load-library LIB]...
//
// Every archive passes the gate (gate.h) first and stays open and locked;
// each model's worker (worker/model_worker.h) loads it by descriptor. The
// server (serve/server.h) answers the Open Inference Protocol until SIGTERM
// or SIGINT, then finishes the requests in flight and exits 0.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/gate.h"
#include "cli/opened_archive.h"
#include "cli/output.h"
#include "cli/worker_options.h"
#include "core/file_edit.h"
#include "serve/http.h"
#include "serve/server.h"

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
  int read_timeout_ms = 10000;
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

int run_serve(const ServeOptions& opts, Context& ctx) {
  if (opts.batch.max_wait_ms > 0 && opts.batch.max_batch <= 1) {
    throw_usage("--max-wait needs --max-batch above 1", "e.g. --max-batch 8 --max-wait 5");
  }
  // Each model: NAME=PATH, or PATH served under its file's stem.
  std::vector<std::unique_ptr<OpenedArchive>> files;
  std::vector<serve::ModelSpec> specs;
  for (const std::string& arg : opts.models) {
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
    auto opened = std::make_unique<OpenedArchive>(path, FileAccess::Read, kReaderLockTimeout, "cannot serve this file", ctx);
    const TorchArchive* archive = &opened->archive();
    check_before_libtorch(*archive, path, "nothing was served", opts.worker.no_validate, ctx.err);
    serve::ModelSpec spec;
    spec.name = name;
    spec.job = opened->job(opts.worker, "serving " + opts.method);
    spec.request.archive = opened->descriptor_path();
    spec.request.display_name = path;
    spec.request.method = opts.method;
    spec.request.device = opts.device;
    spec.request.threads = opts.threads;
    spec.request.libraries = opts.worker.libraries;
    spec.request.lite = archive->kind() == FileKind::LiteInterpreter;
    specs.push_back(std::move(spec));
    files.push_back(std::move(opened));
  }

  serve::HttpServerOptions http_options;
  http_options.host = opts.host;
  http_options.port = opts.port;
  http_options.limits.max_body_bytes = parse_memory_size(opts.max_body, "--max-body");
  http_options.read_timeout_ms = opts.read_timeout_ms;

  ::signal(SIGPIPE, SIG_IGN);  // a client that goes away is a failed send, not the end
  StopSignals signals;
  std::mutex log_mutex;
  const serve::LogLine warn = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    print_warning(ctx.err, line, {});
    ctx.err.flush();
  };
  serve::InferenceServer server(std::move(specs), opts.batch, "/proc/self/exe", warn);
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

  std::thread stopper([&http, &signals] {
    int sig = 0;
    ::sigwait(&signals.set(), &sig);
    http.stop();
  });
  http.serve();  // returns once stopped and every connection has finished
  stopper.join();
  server.stop();
  return 0;
}

}  // namespace

Runner setup_serve(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<ServeOptions>();
  app.description(
      "Serve archives over HTTP with the Open Inference Protocol (KServe v2), which Triton, KServe and\n"
      "MLServer clients speak. Each archive passes verify's checks, then loads once in its own libtorch\n"
      "worker process; a worker that dies fails its requests with 500 and is restarted (readiness is false\n"
      "until it is back). The tsarchive process itself never loads libtorch.\n"
      "\n"
      "Endpoints: GET /v2/health/live, /v2/health/ready, /v2, /v2/models/NAME, /v2/models/NAME/ready;\n"
      "POST /v2/models/NAME/infer with JSON tensors (BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, BF16,\n"
      "FP32, FP64), named as the method's parameters. Outputs are named out, or out[0], out[1], ...\n"
      "Statuses: 400 bad request or inputs that do not fit the model, 404 unknown model or path, 408 request\n"
      "not sent in --read-timeout, 411 no Content-Length (chunked bodies are refused), 413 body over\n"
      "--max-body, 431 headers over 16 KiB, 500 the worker died, 503 not ready or queue full (Retry-After),\n"
      "504 queued past --timeout. Errors are {\"error\": \"...\"}.\n"
      "\n"
      "One line on stdout when it serves: the URL, and each model's signature. SIGTERM or SIGINT: stop\n"
      "accepting, finish the requests in flight, exit 0.");
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
                 "Milliseconds a request may wait in the queue; beyond: 504 without running (default 0: no limit)")
      ->check(CLI::Range(0, 86400000));
  app.add_option("--max-body", opts->max_body, "Largest request body (default 64M); beyond: 413");
  app.add_option("--read-timeout", opts->read_timeout_ms,
                 "Milliseconds from a request's first byte to its last (default 10000); beyond: 408")
      ->check(CLI::Range(1, 3600000));
  add_worker_options(app, opts->worker, true);
  return [opts, &ctx] { return run_serve(*opts, ctx); };
}

}  // namespace tsarchive::cli
