// `serve`'s inference server: the KServe v2 routes over HttpServer, one
// endpoint per model with a bounded queue, dynamic batching and a supervised
// libtorch worker (worker/model_worker.h) that is restarted with back-off
// when it dies. The server process never loads libtorch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "contract/serve.h"
#include "serve/http.h"
#include "worker/model_worker.h"

namespace tsarchive::serve {

struct ModelSpec {
  std::string name;           // the URL's {name}
  WorkerJob job;              // limits, the file as the user named it
  ServeModelRequest request;  // what the worker loads
};

struct BatchOptions {
  int max_batch = 1;        // rows run together; 1: no batching
  int max_wait_ms = 0;      // how long the first request of a batch waits for more
  int max_queue = 64;       // queued requests per model; beyond: 503 with Retry-After
  int timeout_ms = 0;       // a request still queued after this gets 504 without running; 0: none
};

using LogLine = std::function<void(const std::string&)>;

// What one infer request gets: outputs, or an HTTP status and message.
struct InferOutcome {
  int status = 200;
  std::string message;
  std::vector<NamedTensor> outputs;
};

class ModelEndpoint {
 public:
  ModelEndpoint(ModelSpec spec, BatchOptions batch, std::string executable, LogLine warn);
  ~ModelEndpoint();

  // Loads the model in its worker; throws the load's Error. Then starts the
  // dispatcher thread.
  void start();
  bool ready() const;
  const std::string& name() const { return spec_.name; }
  ServedModelInfo info() const;

  // Queues one request; the future answers when it ran, failed or expired.
  // 503 at once when the queue is full or the worker is being restarted.
  std::future<InferOutcome> submit(std::vector<HostTensor> inputs);
  // Answers what is queued, then stops the worker.
  void stop();

 private:
  struct Pending {
    std::vector<HostTensor> inputs;
    std::chrono::steady_clock::time_point deadline;
    std::promise<InferOutcome> promise;
  };
  void dispatch();
  void run(std::vector<Pending>& batch);
  bool restart();

  ModelSpec spec_;
  BatchOptions batch_;
  LogLine warn_;
  std::unique_ptr<ModelWorker> worker_;
  ServedModelInfo info_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool ready_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

class InferenceServer {
 public:
  InferenceServer(std::vector<ModelSpec> models, BatchOptions batch, std::string executable, LogLine warn);
  // Loads every model; throws the first load's Error.
  void start();
  HttpResponse handle(const HttpRequest& request);
  void stop();
  const std::vector<std::unique_ptr<ModelEndpoint>>& models() const { return models_; }

 private:
  ModelEndpoint* find(const std::string& name);
  HttpResponse infer(ModelEndpoint& model, const HttpRequest& request);
  std::vector<std::unique_ptr<ModelEndpoint>> models_;
};

}  // namespace tsarchive::serve
