// `serve` as a service: every archive passes the gate (operations/gate.h)
// first and stays open and locked; each model's worker
// (worker/model_worker.h) loads it by descriptor. The server (server.h)
// answers the Open Inference Protocol until SIGTERM, SIGINT or SIGHUP, then
// stops accepting, finishes the requests in flight and queued within the
// grace period, and returns. The CLI (cli/cmd_serve.cc) gives the settings
// and says how the log lines look.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "operations/notes.h"
#include "operations/verify.h"
#include "operations/worker_settings.h"
#include "serve/server.h"

namespace tsarchive::serve {

struct ServiceSettings {
  std::vector<std::string> models;  // PATH, or NAME=PATH
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string method = "forward";
  std::string device = "cpu";
  int threads = 0;
  BatchOptions batch;
  std::string max_body = "64M";
  std::string max_response = "64M";
  std::string max_inflight = "1G";
  int header_timeout_ms = 10000;
  int read_timeout_ms = 10000;
  int idle_timeout_ms = 60000;
  int max_connections = 256;
  int max_connections_per_client = -1;  // -1: half of max_connections; 0: no cap
  int instances = 1;
  int grace_ms = 30000;
  double sample = 0;
  bool ready_check = false;
  WorkerSettings worker;
  // A signer to trust (--key, --certificate-chain, --trust-root) or
  // --require-stamp: each model passes verify on the descriptor it is served
  // from, before anything is served, or nothing is (verify's exit status).
  std::optional<VerifySettings> verify;
};

// Where the service's lines go.
struct ServiceLog {
  NoteSink note;  // the gate's and the worker sandbox's notes, before serving
  std::function<void(const std::string& what, const std::string& file)> warning;  // `file` may be empty
  std::function<void(const std::string& line)> status;     // a model passed its --ready-check
  std::function<void(const std::string& line)> listening;  // the URL and each model's signature, once serving
};

// Serves until a stop signal; 0 then. Throws Error for what stops it before
// it serves (an archive refused, a failed --ready-check, a port in use).
int serve_models(const ServiceSettings& settings, const ServiceLog& log);

}  // namespace tsarchive::serve
