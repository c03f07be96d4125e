// tsarchive serve MODEL... [--host H] [--port P] [--method NAME] [--device DEV] [--threads N]
//                 [--max-batch N] [--max-wait MS] [--max-queue N] [--timeout MS]
//                 [--instances K] [--grace MS] [--sample P] [--ready-check]
//                 [--max-body SIZE] [--max-response SIZE] [--max-inflight-bytes SIZE]
//                 [--header-timeout MS] [--read-timeout MS] [--idle-timeout MS] [--max-connections N]
//                 [--max-connections-per-client N]
//                 [--memory-limit SIZE] [--time-limit S]
//                 [--no-validate] [--load-library LIB]...
//                 [--key PUBLIC.pem | --certificate-chain ROOTS.pem... | --trust-root trusted_root.json
//                  --identity ID --issuer URL] [--signature SIG] [--require-signature | --allow-unsigned] [--require-stamp]
//
// The options, and the log lines of the service (serve/service.h): notes
// and warnings on stderr, the start line on stdout.
#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/signer_options.h"
#include "cli/worker_options.h"
#include "serve/service.h"

namespace tsarchive::cli {
namespace {

serve::ServiceLog service_log(Context& ctx) {
  serve::ServiceLog log;
  log.note = notes_on(ctx.err);
  log.warning = [&ctx](const std::string& what, const std::string& file) {
    print_warning(ctx.err, what, file);
    ctx.err.flush();
  };
  log.status = [&ctx](const std::string& line) { ctx.err << "tsarchive serve: " << line << std::endl; };
  log.listening = [&ctx](const std::string& line) { ctx.out << line << std::endl; };
  return log;
}

// The limits on what clients may send and hold: --max-body, --max-response,
// --max-inflight-bytes, the timeouts, --max-connections and
// --max-connections-per-client.
void add_limit_options(CLI::App& app, serve::ServiceSettings& settings) {
  app.add_option("--max-body", settings.max_body, "Largest request body (default 64M); beyond: 413")->type_name("SIZE");
  app.add_option("--max-response", settings.max_response,
                 "Largest infer response (default 64M); beyond: 500 naming this option (binary outputs are smaller)")
      ->type_name("SIZE");
  app.add_option("--max-inflight-bytes", settings.max_inflight,
                 "Bytes all requests together may hold: bodies being read, parsed JSON and tensors, responses\n"
                 "(default 1G); a request that does not fit beside the others: 503 with Retry-After; one larger\n"
                 "than this alone: 413. A JSON body takes up to about 25 times its size while parsed")
      ->type_name("SIZE");
  app.add_option("--header-timeout", settings.header_timeout_ms,
                 "Milliseconds from accepting a connection (a later request: from its first byte) to the end of\n"
                 "the request's headers (default 10000); beyond: 408")
      ->check(CLI::Range(1, 3600000));
  app.add_option("--read-timeout", settings.read_timeout_ms,
                 "Milliseconds from the end of a request's headers to the end of its body (default 10000);\n"
                 "beyond: 408")
      ->check(CLI::Range(1, 3600000));
  app.add_option("--idle-timeout", settings.idle_timeout_ms,
                 "Milliseconds a kept-alive connection may wait for its next request (default 60000); beyond: it\n"
                 "closes")
      ->check(CLI::Range(1, 3600000));
  app.add_option("--max-connections", settings.max_connections,
                 "Open connections at once (default 256); beyond: the one waiting longest for a request's\n"
                 "headers closes for the new one, else the one idle longest between requests; a connection\n"
                 "whose request's headers are in never does. With none to close: 503 and close")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-connections-per-client", settings.max_connections_per_client,
                 "Open connections from one client address (an IPv6 client's /64) at once (default: half of\n"
                 "--max-connections; 0: no cap); beyond: 503 with Retry-After and close. Behind a proxy or\n"
                 "sidecar every connection is its address's: raise it or give 0")
      ->check(CLI::Range(0, 1 << 20));
}

}  // namespace

Runner setup_serve(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<serve::ServiceSettings>();
  app.description(
      "Serve archives over HTTP with the Open Inference Protocol (KServe v2), which Triton, KServe and\n"
      "MLServer clients speak. Each archive passes verify's checks, then loads in --instances libtorch\n"
      "worker processes that take requests from the model's queue; a worker that dies fails its requests\n"
      "with 500 and is restarted with back-off (readiness is false until it is back). The tsarchive process\n"
      "itself never loads libtorch.\n"
      "With --key, --certificate-chain or --trust-root (and --require-stamp, --allow-unsigned), each\n"
      "archive also passes verify with those options on the descriptor it is served from, or nothing is\n"
      "served (exit 1 changed, 3 damaged, 7 not signed by that signer, 8 unsafe to load).\n"
      "\n"
      "Endpoints: GET /v2/health/live, /v2/health/ready, /v2, /v2/models/NAME, /v2/models/NAME/ready\n"
      "(HEAD: GET's status and headers, no body); POST /v2/models/NAME/infer with JSON tensors (BOOL,\n"
      "UINT8, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64), named as the method's parameters, or\n"
      "binary (Inference-Header-Content-Length, the binary tensor data extension; outputs too when asked\n"
      "with binary_data).\n"
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
      "--max-response, 503 not ready, queue full, --max-inflight-bytes, --max-connections or\n"
      "--max-connections-per-client in use, or shutting down (Retry-After), 504 past --timeout. Errors\n"
      "are {\"error\": \"...\"}.\n"
      "\n"
      "One line on stdout when it serves: the URL, and each model's signature. SIGTERM or SIGINT: stop\n"
      "accepting, finish the requests in flight and queued within --grace (what is left then gets 503),\n"
      "exit 0.");
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
  app.add_option("--max-wait", opts->batch.max_wait_ms, "Milliseconds a batch waits for more requests (default 0; needs --max-batch above 1)")
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
  add_limit_options(app, *opts);
  add_worker_options(app, opts->worker, true);
  auto verify = std::make_shared<VerifySettings>();
  add_signer_options(app, *verify, false);
  app.add_flag("--require-stamp", verify->require_stamp,
               "Serve nothing unless every archive is stamped by tsarchive and unchanged since (exit 1)");
  return [opts, verify, &ctx] {
    // A signer to trust or --require-stamp: verify each archive on the descriptor it is served from.
    check_signer_options(*verify, opts->models.size());
    if (verify->trusts_a_signer() || verify->require_stamp) opts->verify = *verify;
    return serve::serve_models(*opts, service_log(ctx));
  };
}

}  // namespace tsarchive::cli
