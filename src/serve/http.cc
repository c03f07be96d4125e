#include "serve/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace tsarchive::serve {
namespace {

bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether a comma-separated header value holds `token` (case-insensitive).
bool has_token(std::string_view value, std::string_view token) {
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(',', start);
    if (end == std::string_view::npos) end = value.size();
    if (lower(trim(value.substr(start, end - start))) == token) return true;
    start = end + 1;
  }
  return false;
}

// Whether a line of `head` ends with LF alone. RFC 9112 (2.2) lets a server
// take a bare LF as a line's end; this one refuses it at once instead,
// rather than wait out --header-timeout for a CRLF CRLF that never comes, or
// read a head differently from a proxy in front of it. It looks at the LFs
// alone: no dearer than the search for the head's end that comes with it.
bool has_bare_lf(std::string_view head) {
  for (size_t lf = head.find('\n'); lf != std::string_view::npos; lf = head.find('\n', lf + 1)) {
    if (lf == 0 || head[lf - 1] != '\r') return true;
  }
  return false;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return &value;
  }
  return nullptr;
}

// --- the byte budget --------------------------------------------------------------------

ByteBudget::Grant ByteBudget::take(uint64_t held, uint64_t more) {
  if (more > capacity_ || held > capacity_ - more) return Grant::TooLarge;
  uint64_t used = in_use_.load();
  do {
    if (used > capacity_ - more) return Grant::Busy;
  } while (!in_use_.compare_exchange_weak(used, used + more));
  return Grant::Granted;
}

ByteBudget::Grant MemoryReservation::resize(uint64_t bytes) {
  if (bytes <= held_) {
    if (budget_ != nullptr) budget_->give_back(held_ - bytes);
    held_ = bytes;
    return ByteBudget::Grant::Granted;
  }
  if (budget_ != nullptr) {
    const ByteBudget::Grant grant = budget_->take(held_, bytes - held_);
    if (grant != ByteBudget::Grant::Granted) return grant;
  }
  held_ = bytes;
  return ByteBudget::Grant::Granted;
}

// --- responses -------------------------------------------------------------------------

HttpResponse json_error(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string render_head(const HttpResponse& response, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) + "\r\n";
  if (!response.content_type.empty()) out += "Content-Type: " + response.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  return out;
}

std::string render_response(const HttpResponse& response, bool keep_alive) {
  return render_head(response, keep_alive) + response.body;
}

// --- the parser ----------------------------------------------------------------------

HttpParser::State HttpParser::fail(int status, std::string message) {
  state_ = State::Failed;
  error_status_ = status;
  error_message_ = std::move(message);
  return state_;
}

HttpParser::State HttpParser::feed(std::string_view bytes) {
  if (state_ == State::Failed) return state_;
  buffer_.append(bytes);
  return state_ == State::Complete ? state_ : parse();
}

HttpParser::State HttpParser::next() {
  if (state_ != State::Complete) return state_;
  request_ = HttpRequest{};
  headers_done_ = false;
  body_size_ = 0;
  state_ = State::Incomplete;
  return parse();
}

HttpParser::State HttpParser::parse() {
  if (!headers_done_) {
    // Empty lines before a request line are ignored (RFC 9112, 2.2).
    size_t skip = 0;
    while (buffer_.compare(skip, 2, "\r\n") == 0) skip += 2;
    if (skip > 0) buffer_.erase(0, skip);
    const size_t end = buffer_.find("\r\n\r\n");
    if (has_bare_lf(std::string_view(buffer_).substr(0, end == std::string::npos ? buffer_.size() : end + 4))) {
      return fail(400, "a line of the request's head ends with a bare LF: lines end with CRLF");
    }
    if (end == std::string::npos) {
      if (buffer_.size() > limits_.max_header_bytes) {
        return fail(431, "the request line and headers are longer than " + std::to_string(limits_.max_header_bytes) + " bytes");
      }
      return state_;
    }
    if (end + 4 > limits_.max_header_bytes) {
      return fail(431, "the request line and headers are longer than " + std::to_string(limits_.max_header_bytes) + " bytes");
    }
    if (parse_head(std::string_view(buffer_).substr(0, end + 2)) == State::Failed) return state_;
    buffer_.erase(0, end + 4);
    headers_done_ = true;
  }
  if (buffer_.size() < body_size_) return state_;
  if (buffer_.size() == body_size_) {
    request_.body = std::move(buffer_);  // the usual case, without a second copy of a large body
    buffer_.clear();
  } else {
    request_.body = buffer_.substr(0, body_size_);
    buffer_.erase(0, body_size_);
  }
  state_ = State::Complete;
  return state_;
}

// The request line: METHOD SP TARGET SP VERSION, single spaces.
HttpParser::State HttpParser::parse_request_line(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, "the request line is not 'METHOD TARGET HTTP/1.1'");
  }
  request_.method = std::string(line.substr(0, sp1));
  request_.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  request_.version = std::string(line.substr(sp2 + 1));
  if (request_.method.empty()) return fail(400, "the request line has no method");
  for (char c : request_.method) {
    if (!is_tchar(c)) return fail(400, "the method is not a token");
  }
  if (request_.target.empty() || request_.target[0] != '/') return fail(400, "the request target is not a path");
  for (char c : request_.target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return fail(400, "the request target holds a control character");
  }
  if (request_.version != "HTTP/1.1" && request_.version != "HTTP/1.0") {
    if (request_.version.rfind("HTTP/", 0) == 0) return fail(505, "only HTTP/1.1 and HTTP/1.0 are served");
    return fail(400, "the request line does not end with an HTTP version");
  }
  return state_;
}

// Header fields: NAME ":" OWS VALUE OWS CRLF; no obsolete line folding.
HttpParser::State HttpParser::parse_fields(std::string_view rest) {
  while (!rest.empty()) {
    const size_t end = rest.find("\r\n");
    const std::string_view field = rest.substr(0, end);
    rest.remove_prefix(end + 2);
    if (request_.headers.size() >= limits_.max_headers) {
      return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
    }
    if (field.empty() || field[0] == ' ' || field[0] == '\t') return fail(400, "a header field is folded or empty");
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) return fail(400, "a header field has no name");
    for (char c : field.substr(0, colon)) {
      if (!is_tchar(c)) return fail(400, "a header field name holds a character that is not allowed");
    }
    const std::string_view value = trim(field.substr(colon + 1));
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) return fail(400, "a header field value holds a control character");
    }
    request_.headers.emplace_back(lower(field.substr(0, colon)), std::string(value));
  }
  return state_;
}

// Keep-alive and Expect, from the fields.
HttpParser::State HttpParser::parse_connection() {
  const bool http10 = request_.version == "HTTP/1.0";
  if (!http10 && request_.header("host") == nullptr) return fail(400, "an HTTP/1.1 request needs a Host header");
  const std::string* connection = request_.header("connection");
  request_.keep_alive = http10 ? connection != nullptr && has_token(*connection, "keep-alive")
                               : connection == nullptr || !has_token(*connection, "close");
  if (const std::string* expect = request_.header("expect")) {
    if (lower(*expect) != "100-continue") return fail(417, "only Expect: 100-continue is understood");
    request_.expects_continue = !http10;
  }
  return state_;
}

// The body: Content-Length only.
HttpParser::State HttpParser::parse_body_length() {
  const std::string* length = nullptr;
  bool transfer_encoding = false;
  for (const auto& [name, value] : request_.headers) {
    if (name == "transfer-encoding") transfer_encoding = true;
    if (name != "content-length") continue;
    if (length != nullptr && *length != value) return fail(400, "the request has two different Content-Length headers");
    length = &value;
  }
  if (transfer_encoding) {
    if (length != nullptr) return fail(400, "the request has both Transfer-Encoding and Content-Length");
    const std::string* te = request_.header("transfer-encoding");
    if (has_token(*te, "chunked")) return fail(411, "chunked request bodies are not accepted: send a Content-Length");
    return fail(400, "Transfer-Encoding is not accepted: send a Content-Length");
  }
  if (length == nullptr) {
    if (request_.method == "POST" || request_.method == "PUT") return fail(411, "a " + request_.method + " needs a Content-Length");
    body_size_ = 0;
    return state_;
  }
  if (length->empty() || length->size() > 19) return fail(400, "Content-Length is not a number");
  uint64_t size = 0;
  for (char c : *length) {
    if (c < '0' || c > '9') return fail(400, "Content-Length is not a number");
    size = size * 10 + static_cast<uint64_t>(c - '0');
  }
  if (size > limits_.max_body_bytes) {
    return fail(413, "the body (" + std::to_string(size) + " bytes) is larger than the limit of " +
                         std::to_string(limits_.max_body_bytes) + " bytes (--max-body)");
  }
  body_size_ = size;
  return state_;
}

HttpParser::State HttpParser::parse_head(std::string_view head) {
  const size_t line_end = head.find("\r\n");
  if (parse_request_line(head.substr(0, line_end)) == State::Failed) return state_;
  if (parse_fields(head.substr(line_end + 2)) == State::Failed) return state_;
  if (parse_connection() == State::Failed) return state_;
  return parse_body_length();
}

// --- the server -----------------------------------------------------------------------

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : options_(std::move(options)), handler_(std::move(handler)), budget_(options_.max_inflight_bytes) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options_.port);
  if (const int rc = ::getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    throw_usage("--host " + options_.host + " does not resolve: " + ::gai_strerror(rc), "give an address such as 127.0.0.1, ::1 or 0.0.0.0");
  }
  std::string why;
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listen_fd_ = fd;
      sockaddr_storage bound{};
      socklen_t size = sizeof bound;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size);
      port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) {
    throw_io("cannot listen on " + options_.host + ":" + port + ": " + why, {},
             "choose another --port, or stop what listens there");
  }
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(listen_fd_);
    throw_io(std::string("cannot make a pipe: ") + std::strerror(errno));
  }
}

HttpServer::~HttpServer() {
  stop();
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return connections_ == 0; });
  lock.unlock();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void HttpServer::stop() {
  stopping_ = true;
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
}

namespace {

// The client a connection counts against --max-connections-per-client: its
// IPv4 address, or its IPv6 address's /64 (a host, or a LAN, is given a
// whole /64 and may take any address in it).
std::string client_of(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "";
  if (peer.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(peer).sin_addr, text, sizeof text);
    return text;
  }
  if (peer.ss_family != AF_INET6) return "?";
  in6_addr address = reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&address)) {  // an IPv4 client of a socket bound to ::
    ::inet_ntop(AF_INET, address.s6_addr + 12, text, sizeof text);
    return text;
  }
  std::memset(address.s6_addr + 8, 0, 8);
  ::inet_ntop(AF_INET6, &address, text, sizeof text);
  return std::string(text) + "/64";
}

}  // namespace

void HttpServer::serve() {
  while (!stopping_) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) continue;  // EINTR
    if (stopping_ || (p[1].revents & POLLIN) != 0) break;
    if ((p[0].revents & POLLIN) == 0) continue;
    sockaddr_storage peer{};
    socklen_t size = sizeof peer;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &size, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    admit(fd, client_of(peer));
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return connections_ == 0; });
}

// With mutex_ held: why a new connection from `client` is refused, or
// nothing when it has a slot. At --max-connections a waiting connection is
// closed for it (evict_one): otherwise clients that connect and send nothing,
// or a byte at a time, or a request a minute, would keep every slot. One
// address may not take more than --max-connections-per-client, so that one
// client's requests in progress (never closed for another) leave room.
std::optional<std::string> HttpServer::refusal(const std::string& client) {
  const int cap = options_.max_connections_per_client;
  if (cap > 0) {
    const auto found = per_client_.find(client);
    if (found != per_client_.end() && found->second >= cap) {
      return "too many connections from " + client + ": " + std::to_string(found->second) +
             " are open (--max-connections-per-client " + std::to_string(cap) + ")";
    }
  }
  if (connections_ - evicted_ >= options_.max_connections && !evict_one()) {
    return "too many connections: " + std::to_string(options_.max_connections) +
           " are open, each in the middle of a request (--max-connections)";
  }
  return std::nullopt;
}

bool HttpServer::admit(int fd, const std::string& client) {
  const auto accepted = std::chrono::steady_clock::now();
  Connections::iterator self;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const std::optional<std::string> why = refusal(client)) {
      HttpResponse busy = json_error(503, *why);
      busy.headers.emplace_back("Retry-After", "1");
      const std::string bytes = render_response(busy, false);
      [[maybe_unused]] const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      return false;
    }
    ++connections_;
    ++per_client_[client];
    self = open_.insert(open_.end(), OpenConnection{fd, client, Phase::Head, accepted, false});
  }
  try {
    std::thread([this, fd, self, accepted] { connection(fd, self, accepted); }).detach();
    return true;
  } catch (const std::system_error&) {
    ::close(fd);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--per_client_[client] == 0) per_client_.erase(client);
    open_.erase(self);
    --connections_;
    return false;
  }
}

// With mutex_ held: closes one waiting connection for a new one. First the
// one waiting longest for a request's head, since a client sends a head at
// once; else the one idle longest between requests (it may reconnect); else
// the one whose body has come slowest, counted from its headers, of those
// that have had kBodyGrace and come slower than kBodyFloor bytes a second (a
// client that sends its headers and then a body byte a second would
// otherwise hold its slot until --read-timeout, and enough of them every
// slot; holding every slot now takes kBodyFloor per connection, not a
// trickle, and an upload at a normal speed is never closed). A connection
// being read or answered (Busy) is never closed. A Head or Idle one sees its socket shut down and ends; a Body one
// sees `evicted` within 100 ms and answers 503 before it closes. Until its
// thread has ended it counts in evicted_, not against --max-connections.
bool HttpServer::evict_one() {
  using std::chrono::milliseconds;
  constexpr auto kBodyGrace = milliseconds(1000);
  constexpr double kBodyFloor = 16 * 1024;  // bytes a second
  const auto now = std::chrono::steady_clock::now();
  const auto rank = [](Phase p) { return p == Phase::Head ? 0 : p == Phase::Idle ? 1 : 2; };
  const auto elapsed_ms = [&](const OpenConnection& c) {
    return static_cast<uint64_t>(std::chrono::duration_cast<milliseconds>(now - c.since).count()) + 1;
  };
  const auto before = [&](const OpenConnection& a, const OpenConnection& b) {
    if (a.phase != b.phase) return rank(a.phase) < rank(b.phase);
    if (a.phase != Phase::Body) return a.since < b.since;
    return static_cast<double>(a.body_bytes) / static_cast<double>(elapsed_ms(a)) <
           static_cast<double>(b.body_bytes) / static_cast<double>(elapsed_ms(b));
  };
  Connections::iterator pick = open_.end();
  for (auto it = open_.begin(); it != open_.end(); ++it) {
    if (it->evicted || it->phase == Phase::Busy) continue;
    if (it->phase == Phase::Body &&
        (now - it->since < kBodyGrace ||
         static_cast<double>(it->body_bytes) * 1000.0 / static_cast<double>(elapsed_ms(*it)) >= kBodyFloor)) {
      continue;
    }
    if (pick == open_.end() || before(*it, *pick)) pick = it;
  }
  if (pick == open_.end()) return false;
  pick->evicted = true;
  ++evicted_;
  if (--per_client_[pick->client] == 0) per_client_.erase(pick->client);
  if (pick->phase != Phase::Body) ::shutdown(pick->fd, SHUT_RDWR);
  return true;
}

// Before a connection reads: false when it was evicted (it then reads
// nothing more); else it is Busy, so that it is not evicted mid-read.
bool HttpServer::begin_reading(Connections::iterator self) {
  std::lock_guard<std::mutex> lock(mutex_);
  self->phase = Phase::Busy;
  return !self->evicted;
}

// False when the connection was evicted meanwhile.
bool HttpServer::set_phase(Connections::iterator self, Phase phase, std::chrono::steady_clock::time_point since,
                           uint64_t body_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  self->phase = phase;
  self->since = since;
  self->body_bytes = body_bytes;
  return !self->evicted;
}

namespace {

bool send_all(int fd, const std::string& bytes, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(left));
  }
  return true;
}

// After an error response on a connection whose request was not read in
// full: stop writing, then read what the client still sends for a moment, so
// that closing does not reset the connection before it reads the response.
void lingering_close(int fd) {
  ::shutdown(fd, SHUT_WR);
  char buffer[1 << 14];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if (::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT) <= 0) break;
  }
  ::close(fd);
}

// Bytes of a body held ahead of those read: one read's worth, and as much
// again as the body already read, since its buffer grows by doubling.
uint64_t body_hold(const HttpParser& parser, uint64_t read_size) {
  return std::min(parser.body_size(), 2 * parser.buffered() + read_size);
}

// Why a request's body may not be read further: 413 when it alone is larger
// than the budget, 503 (Retry-After) while the other requests hold too much
// of it; nothing when its reservation now holds `bytes` of it.
std::optional<HttpResponse> reserve_body(MemoryReservation& memory, uint64_t size, uint64_t bytes) {
  if (size > memory.capacity()) {
    return json_error(413, "the body (" + std::to_string(size) + " bytes) is larger than the bytes the server holds "
                           "in flight for all requests (--max-inflight-bytes " + std::to_string(memory.capacity()) + ")");
  }
  if (memory.resize(std::max(memory.bytes(), bytes)) == ByteBudget::Grant::Granted) return std::nullopt;
  HttpResponse busy = json_error(503, "the server holds " + std::to_string(memory.in_use()) + " bytes of requests in flight; "
                                      "a body of " + std::to_string(size) + " bytes does not fit beside them "
                                      "(--max-inflight-bytes " + std::to_string(memory.capacity()) + ")");
  busy.headers.emplace_back("Retry-After", "1");
  return busy;
}

}  // namespace

// What a 408 says: which part of the request did not arrive in time.
std::string HttpServer::timeout_message(bool in_body) const {
  return in_body ? "the request's body did not arrive within " + std::to_string(options_.read_timeout_ms) +
                       " ms of its headers (--read-timeout)"
                 : "the request line and headers did not arrive within " +
                       std::to_string(options_.header_timeout_ms) + " ms (--header-timeout)";
}

// Once a request's headers are in: a body larger than the budget is refused
// on them, the bytes of its body already read are held, and a client that
// asked for 100-continue is told to send it. The body's other bytes are held
// as they arrive (body_hold), not on its Content-Length: a header costs a
// client nothing, and headers alone must not hold the budget from others.
std::optional<HttpResponse> HttpServer::admit_body(int fd, const HttpParser& parser, MemoryReservation& memory) {
  if (auto refusal = reserve_body(memory, parser.body_size(), body_hold(parser, 0))) return refusal;
  if (parser.awaiting_body() && parser.request().expects_continue) {
    send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", options_.read_timeout_ms);
  }
  return std::nullopt;
}

// Answers one whole request; false when the answer could not be sent.
// `keep_alive`: whether the connection stays open after it.
bool HttpServer::respond(int fd, HttpRequest& request, MemoryReservation& memory, bool& keep_alive) {
  request.memory = &memory;
  HttpResponse response;
  try {
    response = handler_(request);
  } catch (const std::exception& e) {
    response = json_error(500, std::string("internal error: ") + e.what());
  }
  keep_alive = request.keep_alive && !response.close && !stopping_;
  // HEAD gets the head GET would, Content-Length and all, and never a body
  // (RFC 9110, 9.3.2): the client would read one as the next response.
  if (request.method == "HEAD") return send_all(fd, render_head(response, keep_alive), options_.read_timeout_ms);
  // A large body goes after its head rather than copied behind it.
  return response.body.size() < (size_t{1} << 16)
             ? send_all(fd, render_response(response, keep_alive), options_.read_timeout_ms)
             : send_all(fd, render_head(response, keep_alive), options_.read_timeout_ms) &&
                   send_all(fd, response.body, options_.read_timeout_ms);
}

void HttpServer::connection(int fd, Connections::iterator self, std::chrono::steady_clock::time_point accepted) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  HttpParser parser(options_.limits);
  MemoryReservation memory(&budget_);
  // A request's clocks: its headers from accept (a connection's first
  // request) or from its first byte (a later one); its body from the end of
  // its headers. They are checked after every read, not only when the
  // connection is quiet, so a byte every few milliseconds does not hold a
  // request open. Accept, not this thread's start: threads start in any
  // order, and which connection has waited longest must not depend on it.
  auto head_since = accepted;
  auto body_since = head_since;
  auto idle_since = head_since;
  bool first = true;
  bool reserved = false;  // the request's body is in `memory`
  bool close_now = false;
  char buffer[1 << 16];
  // The bytes go back before the count: once it is 0 the server (and its
  // budget) may be destroyed.
  const auto finish = [this, &memory, self] {
    memory.release();
    std::lock_guard<std::mutex> lock(mutex_);
    if (self->evicted) {
      --evicted_;
    } else if (--per_client_[self->client] == 0) {
      per_client_.erase(self->client);
    }
    open_.erase(self);
    if (--connections_ == 0) idle_.notify_all();
  };
  // What a connection closed for a new one in the middle of its body is told.
  const auto evicted_body = [this] {
    HttpResponse busy = json_error(503, "the request's body came the slowest while every connection was in use: it "
                                        "was closed for a new one (--max-connections " +
                                            std::to_string(options_.max_connections) + ")");
    busy.headers.emplace_back("Retry-After", "1");
    return busy;
  };
  // Sends an error for a request not read in full, then closes.
  const auto refuse = [&](const HttpResponse& response) {
    send_all(fd, render_response(response, false), options_.read_timeout_ms);
    lingering_close(fd);
    finish();
  };
  while (!close_now) {
    // Requests already buffered (pipelined) are answered before reading more.
    HttpParser::State state = parser.state();
    if (state == HttpParser::State::Incomplete) {
      if (stopping_ && !parser.started()) break;
      const bool in_head = first || parser.started();
      const bool in_body = parser.awaiting_body();
      const auto now = Clock::now();
      const auto deadline = in_body   ? body_since + milliseconds(options_.read_timeout_ms)
                            : in_head ? head_since + milliseconds(options_.header_timeout_ms)
                                      : idle_since + milliseconds(options_.idle_timeout_ms);
      if (now >= deadline) {
        if (!in_head && !in_body) break;  // idle: close quietly
        return refuse(json_error(408, timeout_message(in_body)));
      }
      if (in_body) {
        if (!set_phase(self, Phase::Body, body_since, parser.buffered())) return refuse(evicted_body());
      } else {
        set_phase(self, in_head ? Phase::Head : Phase::Idle, in_head ? head_since : idle_since);
      }
      // The body's bytes are held before they are read.
      if (in_body) {
        if (auto refusal = reserve_body(memory, parser.body_size(), body_hold(parser, sizeof buffer))) return refuse(*refusal);
      }
      // Wakes at least every 100 ms for stop().
      const auto wait = std::min<int64_t>(100, std::chrono::duration_cast<milliseconds>(deadline - now).count() + 1);
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(wait)) <= 0) continue;
      if (!begin_reading(self)) {  // evicted while waiting: closed for a newer connection
        if (in_body) return refuse(evicted_body());
        break;
      }
      const bool started = parser.started();
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!started && !first) head_since = Clock::now();
      state = parser.feed(std::string_view(buffer, static_cast<size_t>(n)));
      if (parser.awaiting_body() && !in_body) body_since = Clock::now();
    }
    if (state == HttpParser::State::Failed) {
      return refuse(json_error(parser.error_status(), parser.error_message()));
    }
    if (parser.headers_done() && !reserved) {
      if (auto refusal = admit_body(fd, parser, memory)) return refuse(*refusal);
      reserved = true;
    }
    if (state != HttpParser::State::Complete) continue;
    // The handler gets the request holding its whole body.
    if (auto refusal = reserve_body(memory, parser.body_size(), parser.body_size())) return refuse(*refusal);
    bool keep_alive = false;
    const bool sent = respond(fd, parser.request(), memory, keep_alive);
    memory.release();
    if (!sent) break;
    if (!keep_alive) close_now = true;
    parser.next();
    first = false;
    reserved = false;
    idle_since = head_since = Clock::now();
  }
  begin_reading(self);  // Busy: never evicted (shut down) once its descriptor is closed
  ::close(fd);
  finish();
}

}  // namespace tsarchive::serve
