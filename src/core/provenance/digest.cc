#include "core/provenance/digest.h"

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include <unistd.h>

#include "base/error.h"
#include "base/posix_fd.h"
#include "base/runtime_library.h"

namespace tsarchive {
namespace {

std::string to_hex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xF];
  }
  return out;
}

// The libcrypto functions Sha256 calls, bound at run time
// (base/runtime_library.h): commands that hash nothing never load it.
struct LibCrypto {
  decltype(&::EVP_MD_CTX_new) md_ctx_new;
  decltype(&::EVP_MD_CTX_free) md_ctx_free;
  decltype(&::EVP_sha256) sha256;
  decltype(&::EVP_DigestInit_ex) digest_init;
  decltype(&::EVP_DigestUpdate) digest_update;
  decltype(&::EVP_DigestFinal_ex) digest_final;
};

LibCrypto load_libcrypto() {
  const RuntimeLibrary library(TSARCHIVE_LIBCRYPTO_SONAME,
                               "install OpenSSL's libcrypto (Debian and Ubuntu: apt-get install libssl3)");
  LibCrypto c{};
  library.bind("EVP_MD_CTX_new", c.md_ctx_new);
  library.bind("EVP_MD_CTX_free", c.md_ctx_free);
  library.bind("EVP_sha256", c.sha256);
  library.bind("EVP_DigestInit_ex", c.digest_init);
  library.bind("EVP_DigestUpdate", c.digest_update);
  library.bind("EVP_DigestFinal_ex", c.digest_final);
  return c;
}

const LibCrypto& libcrypto() {
  static const LibCrypto loaded = load_libcrypto();  // a failed load throws, and the next call tries again
  return loaded;
}

// SHA-256 through OpenSSL's EVP interface (it picks the CPU's SHA instructions).
class Sha256 {
 public:
  Sha256() : crypto_(libcrypto()), ctx_(crypto_.md_ctx_new(), crypto_.md_ctx_free) {
    if (!ctx_ || crypto_.digest_init(ctx_.get(), crypto_.sha256(), nullptr) != 1) throw std::bad_alloc();
  }
  void update(const void* data, size_t n) { crypto_.digest_update(ctx_.get(), data, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    crypto_.digest_final(ctx_.get(), md, &n);
    return to_hex(md, n);
  }

 private:
  const LibCrypto& crypto_;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// The content comes from ZipEntryReader (zip_content.cc), the reader every
// content read shares: exactly the bytes our layout points at, inflated,
// bounded by the declared size, CRC-checked; SHA-256 is taken as it streams.
RecordDigest digest_one(ZipEntryReader& reader, const Record& record, bool with_sha256) {
  RecordDigest out;
  out.name = record.name;
  std::optional<Sha256> sha;  // only when asked: a CRC-only check never loads libcrypto
  if (with_sha256) sha.emplace();
  const ZipContentCheck check = reader.read(*record.entry, [&](const unsigned char* data, size_t n) {
    if (sha) sha->update(data, n);
  });
  out.size = check.size;
  out.crc_ok = check.crc_ok;
  out.problem = check.problem;
  if (out.problem.empty() && sha) out.sha256 = sha->hex();
  return out;
}

}  // namespace

std::vector<RecordDigest> digest_records(const TorchArchive& archive, const DigestOptions& options) {
  std::vector<const Record*> todo;
  for (const Record& r : archive.records()) {
    if (r.entry->is_directory() || r.entry->local_header_offset < options.from_offset) continue;
    if (std::find(options.exclude.begin(), options.exclude.end(), r.name) != options.exclude.end()) continue;
    if (!options.kinds.empty() && std::find(options.kinds.begin(), options.kinds.end(), r.kind) == options.kinds.end()) {
      continue;
    }
    todo.push_back(&r);
  }
  // Largest first, so one big record does not start last and run alone.
  std::vector<size_t> order(todo.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return todo[a]->entry->compressed_size > todo[b]->entry->compressed_size;
  });

  std::vector<RecordDigest> results(todo.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const ByteSource& source = archive.zip().source();
  // libzip must see the records this digests (and PyTorch loads) too.
  archive.zip().cross_check();
  const unsigned cores = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  // A core left over once the smaller records are done takes a big stored
  // record's CRC-32 while its thread hashes it (one huge weights record).
  const bool crc_beside_sha256 = options.sha256 && cores > 1;
  auto worker = [&] {
    ZipEntryReader reader(source);
    reader.crc_beside_sink(crc_beside_sha256);
    for (size_t i; (i = next.fetch_add(1)) < order.size();) {
      try {
        results[order[i]] = digest_one(reader, *todo[order[i]], options.sha256);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = order.size();
      }
    }
  };
  const auto threads = static_cast<unsigned>(std::min<size_t>(cores, std::max<size_t>(order.size(), 1)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  return results;
}

std::string root_digest(std::vector<std::pair<std::string, std::string>> digests) {
  std::sort(digests.begin(), digests.end());
  Sha256 sha;
  for (const auto& [name, hex] : digests) {
    const std::string line = hex + "  " + name + "\n";
    sha.update(line.data(), line.size());
  }
  return sha.hex();
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 sha;
  sha.update(bytes.data(), bytes.size());
  return sha.hex();
}

std::string sha256_source_hex(const ByteSource& source) {
  Sha256 sha;
  std::vector<char> buffer(1 << 20);
  for (uint64_t offset = 0, size = source.size(); offset < size;) {
    const auto n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - offset));
    source.read_at(offset, buffer.data(), n);
    sha.update(buffer.data(), n);
    offset += n;
  }
  return sha.hex();
}

}  // namespace tsarchive
