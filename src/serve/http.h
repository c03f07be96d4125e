// A small, strict HTTP/1.1 server on POSIX sockets for `serve`: keep-alive,
// Content-Length bodies only, limits on the header and the body, separate
// deadlines for the headers and the body of slow or half-sent requests, one
// thread per connection (at most HttpServerOptions::max_connections, and
// max_connections_per_client from one address), and one
// budget of bytes in flight over all connections (ByteBudget). Errors are
// JSON: {"error": "..."}.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tsarchive::serve {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;       // request line and headers: 431 beyond
  size_t max_headers = 100;                   // header lines: 431 beyond
  uint64_t max_body_bytes = uint64_t{64} << 20;  // Content-Length: 413 beyond
};

// Bytes in flight over the whole server: request bodies being read, what
// parsing them makes, responses. Each request holds a MemoryReservation that
// grows and shrinks with it; a request that would pass the capacity is
// refused (503 while others hold the bytes, 413 when it alone needs more)
// instead of growing the process without bound.
class ByteBudget {
 public:
  enum class Grant { Granted, Busy, TooLarge };
  explicit ByteBudget(uint64_t capacity) : capacity_(capacity) {}
  uint64_t capacity() const { return capacity_; }
  uint64_t in_use() const { return in_use_.load(); }

 private:
  friend class MemoryReservation;
  Grant take(uint64_t held, uint64_t more);
  void give_back(uint64_t bytes) { in_use_ -= bytes; }

  const uint64_t capacity_;
  std::atomic<uint64_t> in_use_{0};
};

// One request's share of a ByteBudget, returned when it is destroyed or
// released. Without a budget every size is granted.
class MemoryReservation {
 public:
  explicit MemoryReservation(ByteBudget* budget = nullptr) : budget_(budget) {}
  ~MemoryReservation() { release(); }
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

  // Holds `bytes` in all from now on: shrinking always succeeds; growing
  // takes the difference, or leaves what is held as it was when the budget
  // lacks it now (Busy) or can never give it (TooLarge).
  ByteBudget::Grant resize(uint64_t bytes);
  uint64_t bytes() const { return held_; }
  uint64_t capacity() const { return budget_ != nullptr ? budget_->capacity() : UINT64_MAX; }
  uint64_t in_use() const { return budget_ != nullptr ? budget_->in_use() : held_; }
  void release() { resize(0); }

 private:
  ByteBudget* budget_;
  uint64_t held_ = 0;
};

struct HttpRequest {
  std::string method;   // "GET"
  std::string target;   // "/v2/models/mlp/infer"
  std::string version;  // "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;
  bool keep_alive = true;
  bool expects_continue = false;  // Expect: 100-continue
  // The first header of that (lower-case) name, or null.
  const std::string* header(std::string_view name) const;
  // The request's share of the server's ByteBudget, holding its body when
  // the handler is called; the handler resizes it for what it makes. Null
  // outside HttpServer.
  MemoryReservation* memory = nullptr;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // more headers (Retry-After, Allow)
  bool close = false;  // close the connection after it
};

// {"error": message} with `status`.
HttpResponse json_error(int status, const std::string& message);
const char* reason_phrase(int status);
// The bytes on the wire; `keep_alive` false adds Connection: close.
std::string render_response(const HttpResponse& response, bool keep_alive);
// The status line and headers alone (the body is sent after them, so that a
// large body is not copied).
std::string render_head(const HttpResponse& response, bool keep_alive);

// Parses requests from bytes as they arrive; several requests may follow each
// other on one connection (pipelining).
class HttpParser {
 public:
  enum class State { Incomplete, Complete, Failed };
  explicit HttpParser(HttpLimits limits = {}) : limits_(limits) {}

  // Adds bytes and parses as far as they go.
  State feed(std::string_view bytes);
  State state() const { return state_; }
  // Whether a request has begun (bytes of one are buffered, or it is complete).
  bool started() const { return !buffer_.empty() || headers_done_ || state_ != State::Incomplete; }
  // The headers are in and the request waits for its body.
  bool awaiting_body() const { return headers_done_ && state_ == State::Incomplete; }
  // The headers are in (the body may be too); then body_size() is its Content-Length.
  bool headers_done() const { return headers_done_ || state_ == State::Complete; }
  uint64_t body_size() const { return body_size_; }
  // Bytes read and not yet taken as a request: while the body arrives, its
  // bytes so far.
  uint64_t buffered() const { return buffer_.size(); }
  const HttpRequest& request() const { return request_; }
  HttpRequest& request() { return request_; }
  // With Failed: the status (400, 411, 413, 431, 505, ...) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // After Complete: forgets that request and parses the bytes after it.
  State next();

 private:
  State fail(int status, std::string message);
  State parse();
  State parse_head(std::string_view head);
  State parse_request_line(std::string_view line);
  State parse_fields(std::string_view rest);
  State parse_connection();
  State parse_body_length();

  HttpLimits limits_;
  std::string buffer_;
  State state_ = State::Incomplete;
  bool headers_done_ = false;
  uint64_t body_size_ = 0;
  HttpRequest request_;
  int error_status_ = 0;
  std::string error_message_;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (port() says which)
  HttpLimits limits;
  // A connection's first request line and headers within this of accept, a
  // later request's within this of its first byte: 408 beyond. Checked after
  // every read, so bytes that trickle in do not extend it.
  int header_timeout_ms = 10000;
  int read_timeout_ms = 10000;  // from the end of the headers to the end of the body: 408 beyond
  int idle_timeout_ms = 60000;  // a kept-alive connection with no request is closed
  // Beyond: a connection still waiting for a request's head is closed for
  // the new one (the one waiting longest), else the one idle the longest
  // between requests; with neither, 503 and close.
  int max_connections = 256;
  // Connections from one client address (an IPv6 client's /64) at once;
  // beyond: 503 and close. 0: no cap.
  int max_connections_per_client = 0;
  // Bytes in flight over all connections (ByteBudget): a body larger than
  // this is 413; a body's bytes are held as they arrive (a header's
  // Content-Length holds nothing), and one that does not fit beside the
  // others is 503.
  uint64_t max_inflight_bytes = uint64_t{1} << 30;
};

// Takes the request non-const: a handler may move its body out once parsed.
using HttpHandler = std::function<HttpResponse(HttpRequest&)>;

class HttpServer {
 public:
  // Binds and listens. Error(Usage) for a host that does not resolve,
  // Error(Io) when the address cannot be bound.
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  const ByteBudget& budget() const { return budget_; }
  // Accepts connections until stop(); returns once every connection has
  // finished its request in flight and closed.
  void serve();
  // Stops accepting; idle connections close. Safe from any thread.
  void stop();

 private:
  // What a connection waits for, as the eviction at --max-connections
  // (evict_one) sees it. Head: a request's line and headers (from accept, or
  // from a later request's first byte); Idle: a next request, kept alive;
  // Body: more of a request's body; Busy: neither (it is reading, or
  // answering a request), when it is never closed for another.
  enum class Phase { Head, Idle, Body, Busy };
  // An open connection, as the accepting thread sees it (under mutex_).
  struct OpenConnection {
    int fd;
    std::string client;  // its address, as --max-connections-per-client counts it
    Phase phase = Phase::Head;
    std::chrono::steady_clock::time_point since;  // when its phase began
    uint64_t body_bytes = 0;  // Body: the bytes of it in so far
    bool evicted = false;  // closed for a newer connection: its thread ends without reading more
  };
  using Connections = std::list<OpenConnection>;

  void connection(int fd, Connections::iterator self, std::chrono::steady_clock::time_point accepted);
  bool admit(int fd, const std::string& client);
  std::optional<std::string> refusal(const std::string& client);
  bool evict_one();
  bool begin_reading(Connections::iterator self);
  bool set_phase(Connections::iterator self, Phase phase, std::chrono::steady_clock::time_point since,
                 uint64_t body_bytes = 0);
  bool respond(int fd, HttpRequest& request, MemoryReservation& memory, bool& keep_alive);
  std::optional<HttpResponse> admit_body(int fd, const HttpParser& parser, MemoryReservation& memory);
  std::string timeout_message(bool in_body) const;

  HttpServerOptions options_;
  HttpHandler handler_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable idle_;
  int connections_ = 0;
  int evicted_ = 0;  // of connections_, closing for newer ones
  Connections open_;
  std::unordered_map<std::string, int> per_client_;  // connections not evicted, by OpenConnection::client
  ByteBudget budget_;
};

}  // namespace tsarchive::serve
