// extra/producer_info.json: who and what produced an archive, and digests of
// its records (docs/guide.md, "stamp and verify"; man/tsarchive.1.md, JSON OUTPUT).
//
// Schema (canonical JSON: sorted keys, no spaces, UTF-8, lowerCamelCase):
//   _type        "https://tsarchive.dev/producer-info/v1" (major version last)
//   createdAt    RFC 3339 UTC ("2026-11-21T09:30:00Z"); SOURCE_DATE_EPOCH wins
//   producer     {name, version, method: "export-hook" | "keep-bytes",
//                 libtorchVersion (when libtorch wrote the archive)}
//   archive      {name (top folder), formatVersion} or, from a host program's
//                hook that cannot know them, {moduleType}
//   entries      {algorithm: "sha256", records: {name: hex}, root: hex}
//                (digest.h; every record but the stamp itself; absent from
//                stamps an export hook writes while the records are not yet
//                written)
//   source       {repo, commit, branch, dirty} inside a git checkout
//   ci           {provider, runId, runUrl, job}
//   host         {name, user}, unless opted out
//   previous     {createdAt, root, stampSha256} of the stamp this one replaced
//   <field>      user fields (--field key=value): strings, any key that is
//                not one of the above
// Never secrets: URLs lose their user:password part, and only the named CI
// variables are read, never the whole environment.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/provenance/digest.h"

namespace tsarchive {

class TorchArchive;

inline constexpr const char* kStampName = "producer_info.json";  // under extra/
inline constexpr const char* kStampRecord = "extra/producer_info.json";
inline constexpr const char* kStampType = "https://tsarchive.dev/producer-info/v1";
// PyTorch's deployment note has host programs attach their own
// extra/producer_info.json through the export hook, with whatever a fleet
// puts there. Such a file (one tsarchive did not write: no tsarchive _type)
// belongs to the producer and is never changed; tsarchive's stamp then lives
// beside it under this name.
inline constexpr const char* kStampAltName = "tsarchive/producer_info.json";  // under extra/
inline constexpr const char* kStampAltRecord = "extra/tsarchive/producer_info.json";

// Whether a producer_info.json was written by tsarchive: a JSON object whose
// _type is tsarchive's schema (any major version), or, when it is not JSON,
// bytes naming that schema (a damaged stamp of ours). Anything else is a
// producer's own file.
bool is_tsarchive_stamp(const std::string& bytes);

// Reads one environment variable; empty optional when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_environment();

struct SourceInfo {
  std::string repo;    // remote "origin" URL (or the CI's repository URL), credentials removed; may be empty
  std::string commit;  // full hash
  std::string branch;  // empty when detached
  bool dirty = false;  // tracked files differ from HEAD (only known from a checkout)
  // Empty: read from the git checkout. Else the CI provider whose variables
  // named the commit (GITHUB_SHA, CI_COMMIT_SHA, ...), when there is no
  // checkout to ask: the stamp says "from" instead of "dirty".
  std::string from_ci;
};

struct CiInfo {
  std::string provider;  // "github-actions", "gitlab-ci", "jenkins", "buildkite", "circleci", "generic"
  std::string run_id, run_url, job;
};

// What the environment says about this run, gathered once.
struct ProducerContext {
  std::string created_at;  // RFC 3339 UTC
  std::optional<std::string> host, user;
  std::optional<SourceInfo> source;
  std::optional<CiInfo> ci;
  std::vector<std::string> notes;  // what was left out and why, for people
};

struct ContextOptions {
  EnvLookup env = process_environment();
  bool host = true;
  bool git = true;
  std::string git_dir = ".";  // where to look for a checkout
  std::optional<int64_t> now;  // seconds since the epoch; default: SOURCE_DATE_EPOCH, else the clock
};

// Throws Error(Usage) when SOURCE_DATE_EPOCH is set but not a number.
ProducerContext collect_producer_context(const ContextOptions& options);

// RFC 3339 UTC for seconds since the epoch.
std::string rfc3339_utc(int64_t seconds);

// Removes "user:password@" from URLs ("https://tok@host/x" -> "https://host/x").
std::string strip_url_credentials(const std::string& url);

struct StampContent {
  ProducerContext context;
  std::string producer_name = "tsarchive";
  std::string producer_version;
  std::string method;            // "export-hook" | "keep-bytes"
  std::string libtorch_version;  // empty: not written by libtorch
  std::string archive_name;      // empty when unknown (host-program hook)
  std::optional<int64_t> format_version;
  std::string module_type;       // host-program hook only
  std::optional<std::vector<std::pair<std::string, std::string>>> digests;  // name, sha256 hex
  std::optional<std::string> previous;  // bytes of the stamp this one replaces
  std::map<std::string, std::string> fields;
};

// Why `key` cannot be a user field (empty optional when it can): reserved,
// empty, longer than 128 bytes, or not [A-Za-z][A-Za-z0-9_.-]*.
std::optional<std::string> stamp_field_problem(const std::string& key);

// The canonical JSON text. Throws Error(Usage) for a bad field or a value
// that is not UTF-8.
std::string render_stamp(const StampContent& content);

// Room for a stamp's digests. libtorch's save (the export hook) writes the
// stamp first, before the records whose digests it will hold exist; the core
// then writes the final stamp over it in place (operations/staged_save.h)
// when it fits, and otherwise writes the whole copy again. So the hook's stamp
// is the stamp without digests, padded (pad_stamp) to the size this returns:
// `stamp` plus, for each record of `source` (the archive being re-saved, whose
// copy will hold about as many records, named alike), its entry in the
// digests, a quarter more (at most 1 MiB), and the fields the copy adds.
size_t stamp_size_with_digests(const std::string& stamp, const TorchArchive& source);
// `stamp` followed by spaces and a newline to `size` bytes (JSON allows
// whitespace after the document); as it is when it is that long already.
std::string pad_stamp(std::string stamp, size_t size);
// What the export hook writes when libtorch re-saves `source`: the stamp
// (without digests) padded to stamp_size_with_digests.
std::string render_hook_stamp(const StampContent& content, const TorchArchive& source);

// A stamp read back from an archive.
struct ParsedStamp {
  std::string created_at;
  std::string producer;  // "tsarchive 0.1.0 (export-hook, libtorch 1.13.1)"
  bool has_digests = false;
  std::map<std::string, std::string> digests;  // name -> sha256 hex
  std::string root;
  std::string type;
};

// Throws Error(BadInput) when `bytes` is not a producer_info.json this
// version understands (not JSON, another _type, a newer major version,
// malformed digests). Messages name `record`, where the stamp was read from
// (default: extra/producer_info.json).
ParsedStamp parse_stamp(const std::string& bytes, const std::string& file, const std::string& record = {});

}  // namespace tsarchive
