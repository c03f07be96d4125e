#include "core/provenance/producer_info.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <set>

#include <nlohmann/json.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/utf8.h"
#include "core/inspect/inspect.h"

extern char** environ;

namespace tsarchive {
namespace {

constexpr size_t kMaxValue = 1024;       // bytes of any value taken from the environment or git
constexpr size_t kMaxFieldKey = 128;
constexpr size_t kMaxFieldValue = 4096;
constexpr int kGitTimeoutMs = 10000;

const std::set<std::string>& reserved_keys() {
  static const std::set<std::string> keys = {"_type", "archive", "ci",     "createdAt", "entries",
                                             "host",  "previous", "producer", "source"};
  return keys;
}

bool one_line_utf8(const std::string& s) { return s.find_first_of("\r\n\t") == std::string::npos && is_printable_utf8(s); }

// Runs `argv` with stdin and stderr on /dev/null; its stdout (at most
// `max_output` bytes kept), or empty optional when it cannot run, fails or
// takes longer than the timeout.
std::optional<std::string> capture(const std::vector<std::string>& argv, size_t max_output) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> env_strings = {"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C"};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    if (kv.rfind("GIT_TERMINAL_PROMPT=", 0) == 0 || kv.rfind("GIT_OPTIONAL_LOCKS=", 0) == 0 || kv.rfind("LC_ALL=", 0) == 0) continue;
    env_strings.emplace_back(kv);
  }
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    return std::nullopt;
  }
  std::string out;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kGitTimeoutMs);
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < max_output) out.append(buf, std::min(static_cast<size_t>(n), max_output - out.size()));
  }
  ::close(pipe_fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::optional<std::string> git(const std::string& dir, std::vector<std::string> args, size_t max_output = kMaxValue) {
  args.insert(args.begin(), {"git", "-C", dir});
  return capture(args, max_output);
}

// The source from the git checkout; without one, `why_not` says why (the
// note printed when the CI's variables do not name the commit either).
void collect_source(const ContextOptions& options, ProducerContext& ctx, std::string& why_not) {
  const std::optional<std::string> inside = git(options.git_dir, {"rev-parse", "--is-inside-work-tree"});
  if (!inside) {
    if (!capture({"git", "--version"}, 256)) {
      why_not = "source left out: git is not installed";
    } else {
      why_not = "source left out: " +
                (options.git_dir == "." ? std::string("the working directory") : options.git_dir) +
                " is not inside a git checkout, and no CI variable names the commit (--no-git silences this)";
    }
    return;
  }
  const std::optional<std::string> commit = git(options.git_dir, {"rev-parse", "--verify", "-q", "HEAD"});
  if (!commit || commit->size() < 40 || !one_line_utf8(*commit)) {
    ctx.notes.push_back("source left out: the git checkout has no readable HEAD commit");
    return;
  }
  SourceInfo source;
  source.commit = *commit;
  if (auto branch = git(options.git_dir, {"symbolic-ref", "-q", "--short", "HEAD"}); branch && one_line_utf8(*branch)) {
    source.branch = *branch;
  }
  if (auto url = git(options.git_dir, {"config", "--get", "remote.origin.url"}); url && one_line_utf8(*url)) {
    source.repo = strip_url_credentials(*url);
  }
  // Any output at all means a tracked file differs; one byte is enough to know.
  const std::optional<std::string> status = git(options.git_dir, {"status", "--porcelain", "--untracked-files=no"}, 1);
  if (!status) {
    ctx.notes.push_back("source.dirty unknown: 'git status' failed; reported as dirty");
    source.dirty = true;
  } else {
    source.dirty = !status->empty();
  }
  ctx.source = source;
}

// The first of `names` that is set to a usable value.
std::string env_value(const ContextOptions& options, std::initializer_list<const char*> names, ProducerContext& ctx,
                      bool url = false) {
  for (const char* name : names) {
    const std::optional<std::string> v = options.env(name);
    if (!v || v->empty()) continue;
    if (v->size() > kMaxValue || !one_line_utf8(*v)) {
      ctx.notes.push_back(std::string("ignored ") + name + ": not one line of UTF-8 text up to " +
                          std::to_string(kMaxValue) + " bytes");
      continue;
    }
    return url ? strip_url_credentials(*v) : *v;
  }
  return {};
}

bool env_true(const ContextOptions& options, const char* name) {
  const std::optional<std::string> v = options.env(name);
  return v && !v->empty() && *v != "0" && *v != "false" && *v != "False";
}

void collect_ci(const ContextOptions& options, ProducerContext& ctx) {
  CiInfo ci;
  if (env_true(options, "GITHUB_ACTIONS")) {
    ci.provider = "github-actions";
    ci.run_id = env_value(options, {"GITHUB_RUN_ID"}, ctx);
    const std::string server = env_value(options, {"GITHUB_SERVER_URL"}, ctx, true);
    const std::string repo = env_value(options, {"GITHUB_REPOSITORY"}, ctx);
    if (!server.empty() && !repo.empty() && !ci.run_id.empty()) {
      ci.run_url = server + "/" + repo + "/actions/runs/" + ci.run_id;
    }
    ci.job = env_value(options, {"GITHUB_JOB"}, ctx);
  } else if (env_true(options, "GITLAB_CI")) {
    ci.provider = "gitlab-ci";
    ci.run_id = env_value(options, {"CI_PIPELINE_ID"}, ctx);
    ci.run_url = env_value(options, {"CI_JOB_URL", "CI_PIPELINE_URL"}, ctx, true);
    ci.job = env_value(options, {"CI_JOB_NAME"}, ctx);
  } else if (options.env("JENKINS_URL") || options.env("JENKINS_HOME")) {
    ci.provider = "jenkins";
    ci.run_id = env_value(options, {"BUILD_TAG", "BUILD_NUMBER", "BUILD_ID"}, ctx);
    ci.run_url = env_value(options, {"BUILD_URL"}, ctx, true);
    ci.job = env_value(options, {"JOB_NAME"}, ctx);
  } else if (env_true(options, "BUILDKITE")) {
    ci.provider = "buildkite";
    ci.run_id = env_value(options, {"BUILDKITE_BUILD_ID"}, ctx);
    ci.run_url = env_value(options, {"BUILDKITE_BUILD_URL"}, ctx, true);
    ci.job = env_value(options, {"BUILDKITE_LABEL", "BUILDKITE_STEP_KEY"}, ctx);
  } else if (env_true(options, "CIRCLECI")) {
    ci.provider = "circleci";
    ci.run_id = env_value(options, {"CIRCLE_WORKFLOW_ID", "CIRCLE_BUILD_NUM"}, ctx);
    ci.run_url = env_value(options, {"CIRCLE_BUILD_URL"}, ctx, true);
    ci.job = env_value(options, {"CIRCLE_JOB"}, ctx);
  } else if (env_true(options, "CI")) {
    ci.provider = "generic";
  } else {
    return;
  }
  ctx.ci = ci;
}

bool commit_hash(const std::string& s) {
  if (s.size() != 40 && s.size() != 64) return false;  // SHA-1 or SHA-256 object names
  return s.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

// The source as the CI provider's own variables name it, for a job that
// runs without a checkout (an artifact stage, a container without .git).
std::optional<SourceInfo> source_from_ci(const ContextOptions& options, ProducerContext& ctx) {
  if (!ctx.ci) return std::nullopt;
  SourceInfo s;
  s.from_ci = ctx.ci->provider;
  const std::string& p = ctx.ci->provider;
  if (p == "github-actions") {
    s.commit = env_value(options, {"GITHUB_SHA"}, ctx);
    s.branch = env_value(options, {"GITHUB_HEAD_REF", "GITHUB_REF_NAME"}, ctx);
    const std::string server = env_value(options, {"GITHUB_SERVER_URL"}, ctx, true);
    const std::string repo = env_value(options, {"GITHUB_REPOSITORY"}, ctx);
    if (!server.empty() && !repo.empty()) s.repo = server + "/" + repo;
  } else if (p == "gitlab-ci") {
    s.commit = env_value(options, {"CI_COMMIT_SHA"}, ctx);
    s.branch = env_value(options, {"CI_COMMIT_REF_NAME", "CI_COMMIT_BRANCH"}, ctx);
    s.repo = env_value(options, {"CI_PROJECT_URL", "CI_REPOSITORY_URL"}, ctx, true);
  } else if (p == "jenkins") {
    s.commit = env_value(options, {"GIT_COMMIT"}, ctx);
    s.branch = env_value(options, {"GIT_LOCAL_BRANCH", "GIT_BRANCH", "BRANCH_NAME"}, ctx);
    s.repo = env_value(options, {"GIT_URL"}, ctx, true);
  } else if (p == "buildkite") {
    s.commit = env_value(options, {"BUILDKITE_COMMIT"}, ctx);
    s.branch = env_value(options, {"BUILDKITE_BRANCH"}, ctx);
    s.repo = env_value(options, {"BUILDKITE_REPO"}, ctx, true);
  } else if (p == "circleci") {
    s.commit = env_value(options, {"CIRCLE_SHA1"}, ctx);
    s.branch = env_value(options, {"CIRCLE_BRANCH", "CIRCLE_TAG"}, ctx);
    s.repo = env_value(options, {"CIRCLE_REPOSITORY_URL"}, ctx, true);
  }
  // Buildkite's BUILDKITE_COMMIT may be "HEAD" before its checkout: only a hash names a commit.
  if (!commit_hash(s.commit)) return std::nullopt;
  return s;
}

std::optional<int64_t> source_date_epoch(const EnvLookup& env) {
  const std::optional<std::string> v = env("SOURCE_DATE_EPOCH");
  if (!v) return std::nullopt;
  bool digits = !v->empty() && v->size() <= 12;
  for (char c : *v) digits = digits && c >= '0' && c <= '9';
  if (!digits) {
    throw_usage("SOURCE_DATE_EPOCH is '" + v->substr(0, 40) + "', not a number of seconds",
                "set it to a Unix time such as $(git log -1 --format=%ct), or unset it");
  }
  return std::stoll(*v);
}

void put_if(nlohmann::json& obj, const char* key, const std::string& value) {
  if (!value.empty()) obj[key] = value;
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::string rfc3339_utc(int64_t seconds) {
  const time_t t = static_cast<time_t>(seconds);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string strip_url_credentials(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;  // scp-like "git@host:path": the user is not a secret
  const size_t host_start = scheme + 3;
  const size_t path_start = url.find('/', host_start);
  const size_t at = url.rfind('@', path_start == std::string::npos ? std::string::npos : path_start);
  if (at == std::string::npos || at < host_start) return url;
  return url.substr(0, host_start) + url.substr(at + 1);
}

ProducerContext collect_producer_context(const ContextOptions& options) {
  ProducerContext ctx;
  const std::optional<int64_t> epoch = options.now ? options.now : source_date_epoch(options.env);
  ctx.created_at = rfc3339_utc(epoch ? *epoch : static_cast<int64_t>(std::time(nullptr)));
  if (options.host) {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0 && one_line_utf8(name) && name[0] != '\0') ctx.host = name;
    std::string user = env_value(options, {"USER", "LOGNAME"}, ctx);
    if (user.empty()) {
      if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && one_line_utf8(pw->pw_name)) user = pw->pw_name;
    }
    if (!user.empty()) ctx.user = user;
  }
  collect_ci(options, ctx);
  if (options.git) {
    std::string why_not;
    collect_source(options, ctx, why_not);
    if (!ctx.source) ctx.source = source_from_ci(options, ctx);
    if (!ctx.source && !why_not.empty()) ctx.notes.push_back(why_not);
  }
  return ctx;
}

std::optional<std::string> stamp_field_problem(const std::string& key) {
  if (key.empty()) return "the key is empty";
  if (key.size() > kMaxFieldKey) return "the key is longer than " + std::to_string(kMaxFieldKey) + " bytes";
  if (reserved_keys().count(key) != 0) return "'" + key + "' is a key the stamp itself uses";
  const auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  if (!alpha(key[0])) return "the key must start with a letter";
  for (char c : key) {
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '_' && c != '.' && c != '-') {
      return "the key may hold only letters, digits, '_', '.' and '-'";
    }
  }
  return std::nullopt;
}

std::string render_stamp(const StampContent& c) {
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [key, value] : c.fields) {
    if (auto problem = stamp_field_problem(key)) throw_usage("--field " + key.substr(0, 80) + ": " + *problem);
    if (value.size() > kMaxFieldValue || !is_printable_utf8(value)) {
      throw_usage("--field " + key + ": the value must be UTF-8 text of at most " + std::to_string(kMaxFieldValue) +
                  " bytes");
    }
    doc[key] = value;
  }
  doc["_type"] = kStampType;
  doc["createdAt"] = c.context.created_at;
  nlohmann::json producer = {{"name", c.producer_name}, {"version", c.producer_version}, {"method", c.method}};
  put_if(producer, "libtorchVersion", c.libtorch_version);
  doc["producer"] = producer;
  nlohmann::json archive = nlohmann::json::object();
  put_if(archive, "name", c.archive_name);
  if (c.format_version) archive["formatVersion"] = *c.format_version;
  put_if(archive, "moduleType", c.module_type);
  doc["archive"] = archive;
  if (c.digests) {
    nlohmann::json records = nlohmann::json::object();
    for (const auto& [name, hex] : *c.digests) records[name] = hex;
    doc["entries"] = {{"algorithm", "sha256"}, {"records", records}, {"root", root_digest(*c.digests)}};
  }
  if (c.context.source) {
    const SourceInfo& s = *c.context.source;
    nlohmann::json source = {{"commit", s.commit}};
    if (s.from_ci.empty()) {
      source["dirty"] = s.dirty;
    } else {
      source["from"] = s.from_ci;  // the CI's variables, not a checkout: whether it was dirty is not known
    }
    put_if(source, "repo", s.repo);
    put_if(source, "branch", s.branch);
    doc["source"] = source;
  }
  if (c.context.ci) {
    const CiInfo& ci = *c.context.ci;
    nlohmann::json j = {{"provider", ci.provider}};
    put_if(j, "runId", ci.run_id);
    put_if(j, "runUrl", ci.run_url);
    put_if(j, "job", ci.job);
    doc["ci"] = j;
  }
  if (c.context.host || c.context.user) {
    nlohmann::json host = nlohmann::json::object();
    if (c.context.host) host["name"] = *c.context.host;
    if (c.context.user) host["user"] = *c.context.user;
    doc["host"] = host;
  }
  if (c.previous) {
    nlohmann::json previous = {{"stampSha256", sha256_hex(*c.previous)}};
    try {
      const ParsedStamp old = parse_stamp(*c.previous, {});
      put_if(previous, "createdAt", old.created_at);
      put_if(previous, "root", old.root);
    } catch (const Error&) {
      previous["unreadable"] = true;  // still chained by its bytes' digest
    }
    doc["previous"] = previous;
  }
  return doc.dump();  // std::map keys: sorted; no spaces
}

size_t stamp_size_with_digests(const std::string& stamp, const TorchArchive& source) {
  // "entries":{"algorithm":"sha256","records":{...},"root":"<64 hex>"} and "formatVersion":N.
  constexpr size_t kFixed = 256;
  size_t records = 0;
  for (const Record& r : source.records()) records += r.name.size() + 70;  // "name":"<64 hex>",
  return stamp.size() + kFixed + records + std::min<size_t>(records / 4, 1u << 20);
}

std::string pad_stamp(std::string stamp, size_t size) {
  if (stamp.size() >= size) return stamp;
  stamp.append(size - stamp.size() - 1, ' ');
  stamp.push_back('\n');
  return stamp;
}

std::string render_hook_stamp(const StampContent& content, const TorchArchive& source) {
  std::string stamp = render_stamp(content);
  const size_t room = stamp_size_with_digests(stamp, source);
  return pad_stamp(std::move(stamp), room);
}

bool is_tsarchive_stamp(const std::string& bytes) {
  const std::string base = std::string(kStampType).substr(0, std::string(kStampType).rfind('/') + 1);
  // Not JSON, or JSON past the limits (bounded_json.h): ours only if it names our schema.
  std::string problem;
  const std::optional<nlohmann::json> parsed = parse_bounded_json(bytes, &problem);
  if (!parsed) return bytes.find(base) != std::string::npos;
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) return false;
  const auto type = doc.find("_type");
  return type != doc.end() && type->is_string() && type->get<std::string>().rfind(base, 0) == 0;
}

ParsedStamp parse_stamp(const std::string& bytes, const std::string& file, const std::string& record) {
  const auto bad = [&](const std::string& what) -> void {
    throw_bad_input((record.empty() ? extra_record_name(kStampName) : record) + " " + what, file,
                    "re-stamp the archive with 'tsarchive stamp'");
  };
  std::string problem;
  const std::optional<nlohmann::json> parsed = parse_bounded_json(bytes, &problem);
  if (!parsed) bad(problem == kNotValidJson ? "is not a JSON object" : "holds " + problem);
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) bad("is not a JSON object");
  ParsedStamp stamp;
  const auto type = doc.find("_type");
  if (type == doc.end() || !type->is_string()) bad("has no _type");
  stamp.type = type->get<std::string>();
  const std::string base = std::string(kStampType).substr(0, std::string(kStampType).rfind('/') + 1);
  if (stamp.type.rfind(base, 0) != 0) bad("is of another schema (" + stamp.type.substr(0, 100) + ")");
  if (stamp.type != kStampType) bad("is of a newer major version (" + stamp.type + "); upgrade tsarchive");
  if (auto it = doc.find("createdAt"); it != doc.end() && it->is_string()) stamp.created_at = it->get<std::string>();
  if (auto p = doc.find("producer"); p != doc.end() && p->is_object()) {
    stamp.producer = p->value("name", std::string("?")) + " " + p->value("version", std::string("?"));
    std::string detail = p->value("method", std::string());
    if (p->contains("libtorchVersion") && (*p)["libtorchVersion"].is_string()) {
      detail += (detail.empty() ? "" : ", ") + std::string("libtorch ") + (*p)["libtorchVersion"].get<std::string>();
    }
    if (!detail.empty()) stamp.producer += " (" + detail + ")";
  }
  const auto entries = doc.find("entries");
  if (entries == doc.end()) return stamp;
  if (!entries->is_object() || entries->value("algorithm", std::string()) != "sha256") bad("has entries of an unknown algorithm");
  const auto records = entries->find("records");
  const auto root = entries->find("root");
  if (records == entries->end() || !records->is_object() || root == entries->end() || !root->is_string()) {
    bad("has malformed entries");
  }
  const auto is_hex64 = [](const std::string& s) {
    return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
  };
  for (const auto& [name, hex] : records->items()) {
    if (!hex.is_string() || !is_hex64(hex.get<std::string>())) bad("has a malformed digest for '" + name + "'");
    stamp.digests[name] = hex.get<std::string>();
  }
  stamp.root = root->get<std::string>();
  if (!is_hex64(stamp.root)) bad("has a malformed root digest");
  stamp.has_digests = true;
  return stamp;
}

}  // namespace tsarchive
