// `serve`'s inference server: the KServe v2 routes and /metrics over
// HttpServer, one endpoint per model with a bounded queue, dynamic batching
// and --instances supervised libtorch workers (worker/model_worker.h) that
// take batches from that queue and are restarted with back-off when they
// die. The server process never loads libtorch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "contract/serve.h"
#include "serve/http.h"
#include "serve/metrics.h"
#include "worker/model_worker.h"

namespace tsarchive::serve {

struct ModelSpec {
  std::string name;           // the URL's {name}
  WorkerJob job;              // limits, the file as the user named it
  ServeModelRequest request;  // what the worker loads
  int instances = 1;          // worker processes taking requests from the model's queue
  // Sizes of each input and output (by name) from the archive's recorded
  // self-check, batch dimension first; empty when it has none.
  std::map<std::string, std::vector<int64_t>> recorded_shapes;
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

// Copies of a request's tensors the server holds at the most: its own, their
// CBOR value and the frame to the worker (both gone before the reply is
// read), and with batching, the batch's stacked copy.
constexpr uint64_t kInputCopies = 3;
constexpr uint64_t kBatchedInputCopies = 4;
// Copies of a worker's reply while it is decoded: the frame, its CBOR value
// and the tensors made from it.
constexpr uint64_t kReplyCopies = 3;

// What a worker's reply to one request may take, so that a reply that would
// pass --max-inflight-bytes is not read: the request's reservation (the
// budget's free bytes are read from it when the call starts), and the bytes
// it holds that are free again by the time the reply is read (the frame sent
// to the worker, the tensors the worker makes from spec strings).
struct ReplyRoom {
  const MemoryReservation* memory = nullptr;
  uint64_t freed_by_then = 0;
};

class ModelEndpoint {
 public:
  ModelEndpoint(ModelSpec spec, BatchOptions batch, std::string executable, LogLine warn);
  ~ModelEndpoint();

  // Loads the model in each of its workers; throws the first load's Error.
  // Then starts one dispatcher thread per worker.
  void start();
  // Every worker is loaded and serving.
  bool ready() const;
  const std::string& name() const { return spec_.name; }
  const ModelSpec& spec() const { return spec_; }
  ServedModelInfo info() const;
  ModelMetrics& metrics() { return metrics_; }
  // What /metrics says about this model now; with --sample, after asking
  // each worker for its operator statistics (waiting at most 2 s for a busy
  // one; its last ones are used then).
  ModelReport report();

  // Queues one request (the method's arguments, arguments.h); the future
  // answers when it ran, failed or expired. 503 at once when the queue is
  // full or no worker is serving. --timeout counts from `received` (when the
  // request was read, before it was parsed): 504 at once when parsing it
  // already took that long. `reply`: what the worker's answer may take
  // (ReplyRoom); without it, any answer is read.
  std::future<InferOutcome> submit(std::vector<HostValue> arguments,
                                   std::chrono::steady_clock::time_point received = std::chrono::steady_clock::now(),
                                   ReplyRoom reply = {});
  // Answers what is queued (runs it), then stops the workers.
  void stop();
  // Answers what is still queued with 503 and kills the workers: the
  // requests they run get 503 too, and the workers are not restarted. For
  // the end of SIGTERM's grace period.
  void abort();

 private:
  struct Pending {
    std::vector<HostValue> inputs;
    ReplyRoom reply;
    std::chrono::steady_clock::time_point queued;
    std::chrono::steady_clock::time_point deadline;
    std::promise<InferOutcome> promise;
  };
  struct Instance {
    std::unique_ptr<ModelWorker> worker;
    bool ready = false;  // under mutex_, as the two below
    bool stats_wanted = false;  // /metrics asks its dispatcher for the worker's stats
    ServedStats stats;          // the latest the worker sent
    std::thread thread;
  };
  void dispatch(Instance& instance);
  void run(Instance& instance, std::vector<Pending>& batch);
  std::vector<Pending*> within_deadline(std::vector<Pending>& batch);
  InferOutcome worker_died(Instance& instance, const Error& e, size_t requests);
  static uint64_t reply_cap(const std::vector<Pending*>& requests);
  bool restart(Instance& instance);
  int ready_count() const;  // with mutex_ held
  void fail_queued(const std::string& why);  // with mutex_ held
  void fetch_stats(Instance& instance, std::unique_lock<std::mutex>& lock);

  ModelSpec spec_;
  BatchOptions batch_;
  LogLine warn_;
  std::vector<std::unique_ptr<Instance>> instances_;
  ServedModelInfo info_;
  ModelMetrics metrics_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable stats_fetched_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  bool aborting_ = false;  // abort() kills the workers: a call that fails is not a crash
};

class InferenceServer {
 public:
  // `max_response_bytes`: the longest infer response (--max-response); a
  // longer one is 500 naming it.
  InferenceServer(std::vector<ModelSpec> models, BatchOptions batch, std::string executable, LogLine warn,
                  uint64_t max_response_bytes = uint64_t{64} << 20);
  // Loads every model; throws the first load's Error.
  void start();
  // Takes the body out of `request` once it is parsed.
  HttpResponse handle(HttpRequest& request);
  void stop();
  void abort();  // ModelEndpoint::abort for every model
  const std::vector<std::unique_ptr<ModelEndpoint>>& models() const { return models_; }

 private:
  ModelEndpoint* find(const std::string& name);
  HttpResponse infer(ModelEndpoint& model, HttpRequest& request, std::chrono::steady_clock::time_point received);
  HttpResponse metrics() const;
  std::vector<std::unique_ptr<ModelEndpoint>> models_;
  uint64_t max_response_bytes_;
  uint64_t input_copies_;  // kInputCopies, or kBatchedInputCopies with --max-batch over 1
};

}  // namespace tsarchive::serve
