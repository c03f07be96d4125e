#include "serve/server.h"

#include <signal.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/build_info.h"
#include "base/error.h"
#include "serve/arguments.h"
#include "serve/v2.h"

namespace tsarchive::serve {
namespace {

using Clock = std::chrono::steady_clock;

InferOutcome failure(int status, std::string message) {
  InferOutcome o;
  o.status = status;
  o.message = std::move(message);
  return o;
}

}  // namespace

// --- one model ------------------------------------------------------------------------

ModelEndpoint::ModelEndpoint(ModelSpec spec, BatchOptions batch, std::string executable, LogLine warn)
    : spec_(std::move(spec)), batch_(batch), warn_(std::move(warn)) {
  for (int i = 0; i < std::max(1, spec_.instances); ++i) {
    auto instance = std::make_unique<Instance>();
    instance->worker = std::make_unique<ModelWorker>(spec_.job, spec_.request, executable);
    instances_.push_back(std::move(instance));
  }
}

ModelEndpoint::~ModelEndpoint() { stop(); }

void ModelEndpoint::start() {
  for (auto& instance : instances_) {
    ServedModelInfo info = instance->worker->start();
    std::lock_guard<std::mutex> lock(mutex_);
    info_ = std::move(info);
    instance->ready = true;
  }
  for (auto& instance : instances_) {
    Instance* self = instance.get();
    instance->thread = std::thread([this, self] { dispatch(*self); });
  }
}

int ModelEndpoint::ready_count() const {
  int n = 0;
  for (const auto& instance : instances_) n += instance->ready ? 1 : 0;
  return n;
}

bool ModelEndpoint::ready() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !stopping_ && ready_count() == static_cast<int>(instances_.size());
}

ServedModelInfo ModelEndpoint::info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return info_;
}

ModelReport ModelEndpoint::report() {
  ModelReport r;
  r.name = spec_.name;
  r.counters = metrics_.snapshot();
  r.instances = static_cast<int>(instances_.size());
  std::unique_lock<std::mutex> lock(mutex_);
  if (spec_.request.sample > 0 && !stopping_) {
    for (auto& instance : instances_) instance->stats_wanted = instance->ready;
    wake_.notify_all();
    stats_fetched_.wait_for(lock, std::chrono::seconds(2), [this] {
      return stopping_ || std::none_of(instances_.begin(), instances_.end(), [](const auto& i) { return i->stats_wanted; });
    });
  }
  r.queue_depth = queue_.size();
  r.ready = !stopping_ && ready_count() == static_cast<int>(instances_.size());
  r.sample = spec_.request.sample;
  for (const auto& instance : instances_) {
    // The calls the model id guard tagged: the served method's, not the load's.
    for (const OperatorStats& op : instance->stats.operators) {
      if (op.model_id == spec_.request.model_id) r.operators.push_back(op);
    }
    for (const std::string& key : instance->stats.api_usage) {
      if (std::find(r.api_usage.begin(), r.api_usage.end(), key) == r.api_usage.end()) r.api_usage.push_back(key);
    }
  }
  return r;
}

void ModelEndpoint::fetch_stats(Instance& instance, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  std::optional<ServedStats> stats;
  try {
    stats = instance.worker->stats();
  } catch (const Error& e) {
    if (!instance.worker->alive()) {
      warn_("model '" + spec_.name + "' (" + spec_.job.file + "): " + e.what() + "; restarting its worker");
    }
  }
  lock.lock();
  if (stats) instance.stats = std::move(*stats);
  if (!instance.worker->alive()) instance.ready = false;
  instance.stats_wanted = false;
  stats_fetched_.notify_all();
}

std::future<InferOutcome> ModelEndpoint::submit(std::vector<HostValue> arguments, Clock::time_point received,
                                                ReplyRoom reply) {
  Pending p;
  p.inputs = std::move(arguments);
  p.reply = reply;
  p.queued = Clock::now();
  p.deadline = batch_.timeout_ms > 0 ? received + std::chrono::milliseconds(batch_.timeout_ms) : Clock::time_point::max();
  std::future<InferOutcome> result = p.promise.get_future();
  std::lock_guard<std::mutex> lock(mutex_);
  if (p.queued > p.deadline) {
    p.promise.set_value(failure(504, "reading and parsing the request took longer than --timeout (" +
                                         std::to_string(batch_.timeout_ms) + " ms); it was not run"));
  } else if (stopping_) {
    p.promise.set_value(failure(503, "the server is shutting down"));
  } else if (ready_count() == 0) {
    p.promise.set_value(failure(503, "model '" + spec_.name + "' is not ready: its worker is being restarted"));
  } else if (queue_.size() >= static_cast<size_t>(batch_.max_queue)) {
    p.promise.set_value(failure(503, "model '" + spec_.name + "' has " + std::to_string(queue_.size()) +
                                         " requests queued (--max-queue)"));
  } else {
    queue_.push_back(std::move(p));
    wake_.notify_all();  // a dispatcher in restart back-off waits on it too
  }
  return result;
}

void ModelEndpoint::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  stats_fetched_.notify_all();
  for (auto& instance : instances_) {
    if (instance->thread.joinable()) instance->thread.join();
  }
  for (auto& instance : instances_) instance->worker->stop();
}

void ModelEndpoint::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    aborting_ = true;
    fail_queued("the server is shutting down: the request was still queued when the grace period (--grace) ended");
  }
  wake_.notify_all();
  stats_fetched_.notify_all();
  // A worker mid-call sees its pipe end; its dispatcher answers 503 (worker_died).
  for (auto& instance : instances_) {
    instance->worker->kill();
  }
}

void ModelEndpoint::fail_queued(const std::string& why) {
  while (!queue_.empty()) {
    queue_.front().promise.set_value(failure(503, why));
    queue_.pop_front();
  }
}

bool ModelEndpoint::restart(Instance& instance) {
  try {
    ServedModelInfo info = instance.worker->start();
    std::lock_guard<std::mutex> lock(mutex_);
    info_ = std::move(info);
    return true;
  } catch (const Error& e) {
    warn_("model '" + spec_.name + "': its worker did not restart: " + e.what());
    return false;
  }
}

void ModelEndpoint::dispatch(Instance& instance) {
  auto backoff = std::chrono::milliseconds(100);
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (!instance.ready) {
      // The worker died. With no other worker serving, what is queued gets
      // 503 now; it is restarted with back-off (0.1 s, doubling to 10 s)
      // until it loads again.
      if (ready_count() == 0) fail_queued("model '" + spec_.name + "' is not ready: its worker is being restarted");
      if (stopping_) break;
      if (wake_.wait_for(lock, backoff, [this] { return stopping_; })) break;
      lock.unlock();
      const bool ok = restart(instance);
      lock.lock();
      if (ok) {
        instance.ready = true;
        backoff = std::chrono::milliseconds(100);
        metrics_.restarted();
        warn_("model '" + spec_.name + "': its worker is back (pid " + std::to_string(instance.worker->pid()) + ")");
      } else {
        backoff = std::min(backoff * 2, std::chrono::milliseconds(10000));
      }
      continue;
    }
    // Idle, it looks at its worker every 100 ms: one that died between calls,
    // or passed its memory or disk limit (a model's own thread may go on),
    // makes the model not ready at once, and is restarted.
    if (!wake_.wait_for(lock, std::chrono::milliseconds(100),
                        [&] { return stopping_ || !queue_.empty() || instance.stats_wanted; })) {
      std::string why;
      if (instance.worker->ended(why) || instance.worker->stopped_at_limit(why)) {
        warn_("model '" + spec_.name + "' (" + spec_.job.file + "): " + why + " between requests; restarting its worker");
        instance.ready = false;
      }
      continue;
    }
    if (instance.stats_wanted) {
      fetch_stats(instance, lock);
      continue;
    }
    if (queue_.empty()) break;  // stopping, and everything queued was answered

    std::vector<Pending> batch;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
    // Requests batch when their tensors stack and every other argument is equal.
    const std::optional<int64_t> first_rows = batch_rows(tensors_of(batch[0].inputs));
    if (batch_.max_batch > 1 && first_rows && *first_rows < batch_.max_batch) {
      int64_t total = *first_rows;
      const auto until = Clock::now() + std::chrono::milliseconds(batch_.max_wait_ms);
      while (total < batch_.max_batch) {
        if (!queue_.empty()) {
          Pending& next = queue_.front();
          const std::optional<int64_t> rows = batch_rows(tensors_of(next.inputs));
          if (!rows || !same_non_tensors(batch[0].inputs, next.inputs) ||
              !stackable(tensors_of(batch[0].inputs), tensors_of(next.inputs)) || total + *rows > batch_.max_batch) {
            break;
          }
          total += *rows;
          batch.push_back(std::move(next));
          queue_.pop_front();
          continue;
        }
        if (stopping_ || !wake_.wait_until(lock, until, [this] { return stopping_ || !queue_.empty(); })) break;
      }
    }
    // Another worker may take what this batch left in the queue.
    if (!queue_.empty()) wake_.notify_all();
    lock.unlock();
    run(instance, batch);
    lock.lock();
  }
}

// The batch's requests still within --timeout; the others are answered 504.
std::vector<ModelEndpoint::Pending*> ModelEndpoint::within_deadline(std::vector<Pending>& batch) {
  const auto now = Clock::now();
  std::vector<Pending*> live;
  for (Pending& p : batch) {
    metrics_.queued(std::chrono::duration<double>(now - p.queued).count());
    if (now > p.deadline) {
      p.promise.set_value(failure(504, "the request waited longer than --timeout (" + std::to_string(batch_.timeout_ms) +
                                           " ms) and was not run"));
    } else {
      live.push_back(&p);
    }
  }
  return live;
}

// The longest reply the requests may take from the budget: what is free in
// it now and what they hold that is free again by the time the reply is
// read, over the copies decoding makes. The requests' threads wait on their
// futures meanwhile: their reservations do not change under this read.
uint64_t ModelEndpoint::reply_cap(const std::vector<Pending*>& requests) {
  if (requests.empty() || requests[0]->reply.memory == nullptr) return UINT64_MAX;
  const MemoryReservation& memory = *requests[0]->reply.memory;
  uint64_t room = memory.capacity() - std::min(memory.capacity(), memory.in_use());
  for (const Pending* p : requests) room += p->reply.freed_by_then;
  return room / kReplyCopies;
}

namespace {

// The answer for a reply that was too long to read: 413 when the budget
// could never hold it, 503 while other requests hold what it lacks.
InferOutcome reply_refusal(const ReplyTooLarge& e, const ReplyRoom& room) {
  const uint64_t capacity = room.memory != nullptr ? room.memory->capacity() : UINT64_MAX;
  const uint64_t needed = e.reply_bytes() > UINT64_MAX / kReplyCopies ? UINT64_MAX : e.reply_bytes() * kReplyCopies;
  const std::string budget = " (--max-inflight-bytes " + std::to_string(capacity) + ")";
  if (needed > capacity) {
    return failure(413, "the model's outputs for the request take " + std::to_string(e.reply_bytes()) +
                            " bytes, and reading them about " + std::to_string(needed) +
                            ", more than the server holds in flight for all requests" + budget +
                            ": ask for fewer or smaller outputs");
  }
  return failure(503, "the model's outputs for the request take " + std::to_string(e.reply_bytes()) +
                          " bytes, more than the server has free beside the other requests now" + budget);
}

}  // namespace

// A worker that died under a call of `requests` requests: it is not ready
// (its dispatcher restarts it), and they get 500 with its error. Unless
// abort() killed it at the end of --grace: then the server is exiting, the
// worker is not restarted, and they get 503 like the requests still queued.
InferOutcome ModelEndpoint::worker_died(Instance& instance, const Error& e, size_t requests) {
  std::lock_guard<std::mutex> lock(mutex_);
  instance.ready = false;
  if (aborting_) return failure(503, "the server is shutting down: the request was still running when --grace ended");
  warn_("model '" + spec_.name + "' (" + spec_.job.file + "): " + e.what() + "; " + std::to_string(requests) +
        " request(s) failed; restarting its worker");
  return failure(500, e.what());
}

void ModelEndpoint::run(Instance& instance, std::vector<Pending>& batch) {
  ModelWorker& worker = *instance.worker;
  const std::vector<Pending*> live = within_deadline(batch);
  if (live.empty()) return;

  // Once the worker died under a call, what the batch's other requests get.
  std::optional<InferOutcome> died;
  // One worker call, timed for /metrics.
  const auto call = [&](const std::vector<HostValue>& inputs, size_t requests, uint64_t max_reply_bytes) {
    const auto began = Clock::now();
    struct Record {
      ModelMetrics& metrics;
      size_t requests;
      Clock::time_point began;
      ~Record() { metrics.computed(requests, std::chrono::duration<double>(Clock::now() - began).count()); }
    } record{metrics_, requests, began};
    return worker.infer(inputs, max_reply_bytes);
  };
  const auto alone = [&](Pending& p) {
    if (died) {
      p.promise.set_value(*died);
      return;
    }
    try {
      InferOutcome o;
      o.outputs = call(p.inputs, 1, reply_cap({&p}));
      p.promise.set_value(std::move(o));
    } catch (const ReplyTooLarge& e) {
      p.promise.set_value(reply_refusal(e, p.reply));
    } catch (const Error& e) {
      if (!worker.alive()) {
        died = worker_died(instance, e, live.size());
        p.promise.set_value(*died);
      } else {
        p.promise.set_value(failure(400, e.what()));
      }
    }
  };

  if (live.size() == 1) return alone(*live[0]);
  std::vector<std::vector<HostTensor>> tensors;
  std::vector<const std::vector<HostTensor>*> inputs;
  std::vector<int64_t> rows;
  for (Pending* p : live) tensors.push_back(tensors_of(p->inputs));
  for (const auto& t : tensors) {
    inputs.push_back(&t);
    rows.push_back(*batch_rows(t));
  }
  try {
    // A batch's reply too long to read (ReplyTooLarge) is an Error with the
    // worker alive: each request then runs alone, within its own room.
    const std::vector<NamedTensor> outputs =
        call(with_tensors(live[0]->inputs, stack(inputs)), live.size(), reply_cap(live));
    if (auto split = unstack(outputs, rows)) {
      for (size_t i = 0; i < live.size(); ++i) {
        InferOutcome o;
        o.outputs = std::move((*split)[i]);
        live[i]->promise.set_value(std::move(o));
      }
      return;
    }
  } catch (const Error& e) {
    if (!worker.alive()) {
      died = worker_died(instance, e, live.size());
      for (Pending* p : live) p->promise.set_value(*died);
      return;
    }
  }
  // The batch failed or its outputs do not split by rows: each runs alone,
  // and gets its own answer.
  for (Pending* p : live) alone(*p);
}

// --- the routes --------------------------------------------------------------------------

InferenceServer::InferenceServer(std::vector<ModelSpec> models, BatchOptions batch, std::string executable, LogLine warn,
                                 uint64_t max_response_bytes)
    : max_response_bytes_(max_response_bytes),
      input_copies_(batch.max_batch > 1 ? kBatchedInputCopies : kInputCopies) {
  for (ModelSpec& spec : models) {
    models_.push_back(std::make_unique<ModelEndpoint>(std::move(spec), batch, executable, warn));
  }
}

void InferenceServer::start() {
  for (auto& model : models_) model->start();
}

void InferenceServer::stop() {
  for (auto& model : models_) model->stop();
}

void InferenceServer::abort() {
  for (auto& model : models_) model->abort();
}

HttpResponse InferenceServer::metrics() const {
  std::vector<ModelReport> reports;
  for (const auto& model : models_) reports.push_back(model->report());
  HttpResponse r;
  r.body = render_metrics(reports);
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  return r;
}

ModelEndpoint* InferenceServer::find(const std::string& name) {
  for (auto& model : models_) {
    if (model->name() == name) return model.get();
  }
  return nullptr;
}

namespace {

HttpResponse json_ok(const nlohmann::json& body) {
  HttpResponse r;
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

HttpResponse empty_ok() {
  HttpResponse r;
  r.content_type.clear();
  return r;
}

// 405 with the route's methods in Allow, as "GET, HEAD".
HttpResponse not_allowed(const std::string& allow) {
  std::string methods = allow;
  if (const size_t comma = methods.find(", "); comma != std::string::npos) methods.replace(comma, 2, " or ");
  HttpResponse r = json_error(405, "use " + methods + " here");
  r.headers.emplace_back("Allow", allow);
  return r;
}

// What an error echoes of the request's path: its first 200 bytes, so that
// a 16 KiB segment does not come back whole.
std::string shown(const std::string& text) { return text.substr(0, 200); }

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace

HttpResponse InferenceServer::handle(HttpRequest& request) {
  const std::string path = request.target.substr(0, request.target.find('?'));
  std::vector<std::string> parts = split_path(path);
  if (!parts.empty() && parts.back().empty() && parts.size() > 1) parts.pop_back();  // a trailing slash
  // HEAD is GET without the body (HttpServer sends the head alone).
  const bool get = request.method == "GET" || request.method == "HEAD";
  const auto is = [&](std::initializer_list<const char*> want) {
    if (parts.size() != want.size()) return false;
    size_t i = 0;
    for (const char* w : want) {
      if (*w != '*' && parts[i] != w) return false;
      ++i;
    }
    return true;
  };

  if (is({"v2", "health", "live"})) return get ? empty_ok() : not_allowed("GET, HEAD");
  if (is({"v2", "health", "ready"})) {
    if (!get) return not_allowed("GET, HEAD");
    for (auto& model : models_) {
      if (!model->ready()) return json_error(400, "model '" + model->name() + "' is not ready");
    }
    return empty_ok();
  }
  if (is({"metrics"})) return get ? metrics() : not_allowed("GET, HEAD");
  if (is({"v2"})) {
    if (!get) return not_allowed("GET, HEAD");
    return json_ok({{"name", "tsarchive"}, {"version", build_info().version}, {"extensions", nlohmann::json::array({"binary_tensor_data"})}});
  }
  // /v2/models/{name}[/versions/{v}][/ready|/infer]
  if (parts.size() >= 3 && parts[0] == "v2" && parts[1] == "models") {
    ModelEndpoint* model = find(parts[2]);
    std::vector<std::string> rest(parts.begin() + 3, parts.end());
    if (rest.size() >= 2 && rest[0] == "versions") {
      if (rest[1] != "1") {
        return json_error(404, "model '" + shown(parts[2]) + "' has no version '" + shown(rest[1]) + "'; it has 1");
      }
      rest.erase(rest.begin(), rest.begin() + 2);
    }
    if (rest.size() > 1 || (rest.size() == 1 && rest[0] != "ready" && rest[0] != "infer")) {
      return json_error(404, "no such endpoint: " + shown(path));
    }
    if (model == nullptr) return json_error(404, "no model named '" + shown(parts[2]) + "' is served");
    if (rest.empty()) {
      return get ? json_ok(model_metadata(model->name(), model->info(), model->spec().recorded_shapes))
                 : not_allowed("GET, HEAD");
    }
    if (rest[0] == "ready") {
      if (!get) return not_allowed("GET, HEAD");
      return model->ready() ? empty_ok() : json_error(400, "model '" + model->name() + "' is not ready");
    }
    if (request.method != "POST") return not_allowed("POST");
    const auto began = std::chrono::steady_clock::now();
    HttpResponse response = infer(*model, request, began);
    model->metrics().request(response.status, std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    return response;
  }
  return json_error(404, "no such endpoint: " + shown(path));
}

namespace {

uint64_t tensor_bytes(const std::vector<InferInput>& inputs) {
  uint64_t total = 0;
  for (const InferInput& in : inputs) total += (in.tensor.bytes ? in.tensor.bytes->size() : 0) + (in.text ? in.text->size() : 0);
  return total;
}

uint64_t tensor_bytes(const std::vector<NamedTensor>& outputs) {
  uint64_t total = 0;
  for (const NamedTensor& out : outputs) total += out.tensor.bytes ? out.tensor.bytes->size() : 0;
  return total;
}

// Makes the request's reservation hold `bytes` before what needs them is
// made: ApiError 413 when the budget could never hold them, 503 while other
// requests hold too much of it.
void hold(MemoryReservation& memory, uint64_t bytes, const std::string& what) {
  switch (memory.resize(bytes)) {
    case ByteBudget::Grant::Granted:
      return;
    case ByteBudget::Grant::TooLarge:
      throw ApiError(413, "the request needs about " + std::to_string(bytes) + " bytes for " + what +
                              ", more than the server holds in flight for all requests (--max-inflight-bytes " +
                              std::to_string(memory.capacity()) + ")");
    case ByteBudget::Grant::Busy:
      throw ApiError(503, "the server holds " + std::to_string(memory.in_use()) + " bytes of requests in flight; the " +
                              std::to_string(bytes - memory.bytes()) + " more this one needs for " + what +
                              " do not fit (--max-inflight-bytes " + std::to_string(memory.capacity()) + ")");
  }
}

}  // namespace

HttpResponse InferenceServer::infer(ModelEndpoint& model, HttpRequest& request, Clock::time_point received) {
  // The request's share of --max-inflight-bytes, holding its body already;
  // it grows before each thing the request makes, so that a request that
  // would pass the budget is refused before the memory is taken.
  MemoryReservation unlimited;
  MemoryReservation& memory = request.memory != nullptr ? *request.memory : unlimited;
  try {
    std::optional<uint64_t> json_size;
    if (const std::string* header = request.header("inference-header-content-length")) {
      const bool digits = !header->empty() && header->size() <= 18 &&
                          std::all_of(header->begin(), header->end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) throw ApiError(400, "Inference-Header-Content-Length is not a size: " + header->substr(0, 40));
      json_size = std::stoull(*header);
    }
    hold(memory, request.body.size() + parse_cost(request.body, json_size), "parsing it");
    InferRequest parsed = parse_infer_request(request.body, json_size);
    // Parsed, the body is not needed: binary tensors were copied out of it.
    std::string().swap(request.body);
    const uint64_t tensors = tensor_bytes(parsed.inputs);
    uint64_t generated = 0;  // the tensors the worker makes from spec strings; their outputs come back as large
    std::vector<HostValue> arguments = method_arguments(model.name(), model.info(), parsed, &generated);
    hold(memory, input_copies_ * tensors + generated, "its tensors");
    // All but the request's own tensors (the copies on the way to the worker,
    // and the generated ones, which live in the worker) are free again when
    // the reply comes: room for it.
    const ReplyRoom reply{&memory, (input_copies_ - 1) * tensors + generated};
    InferOutcome outcome = model.submit(std::move(arguments), received, reply).get();
    if (outcome.status != 200) {
      HttpResponse r = json_error(outcome.status, outcome.message);
      if (outcome.status == 503) r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    // The outputs are counted once they are back (the worker's reply was
    // read only when the budget had room for it); the response's text
    // before it is written.
    const uint64_t outputs = tensor_bytes(outcome.outputs);
    const uint64_t response_bound =
        std::min(response_size_bound(outcome.outputs, parsed.binary_outputs, parsed.binary_data_output),
                 max_response_bytes_ + (uint64_t{1} << 16));
    hold(memory, tensors + outputs + response_bound, "its response");
    HttpResponse r;
    size_t header_size = 0;
    r.body = render_infer_response(model.name(), parsed.id, outcome.outputs, parsed.outputs, parsed.binary_outputs,
                                   parsed.binary_data_output, &header_size, max_response_bytes_);
    if (header_size > 0) {
      r.content_type = "application/octet-stream";
      r.headers.emplace_back("Inference-Header-Content-Length", std::to_string(header_size));
    }
    return r;
  } catch (const ApiError& e) {
    HttpResponse r = json_error(e.status(), e.what());
    if (e.status() == 503) r.headers.emplace_back("Retry-After", "1");
    return r;
  }
}

}  // namespace tsarchive::serve
