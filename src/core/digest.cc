#include "tsarchive/digest.h"

#include <openssl/evp.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>

#include "tsarchive/error.h"

namespace tsarchive {
namespace {

constexpr size_t kChunk = 1 << 20;

std::string to_hex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xF];
  }
  return out;
}

// SHA-256 through OpenSSL's EVP interface (it picks the CPU's SHA instructions).
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
  }
  void update(const void* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &n);
    return to_hex(md, n);
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// Both checks over the uncompressed bytes, as they come.
struct ContentSink {
  Sha256 sha;
  uLong crc = crc32(0, nullptr, 0);
  uint64_t size = 0;
  void add(const unsigned char* data, size_t n) {
    sha.update(data, n);
    crc = crc32_z(crc, data, n);
    size += n;
  }
};

void read_stored(const ByteSource& source, const ZipEntry& e, std::vector<unsigned char>& buf, ContentSink& sink,
                 RecordDigest& out) {
  if (e.compressed_size != e.uncompressed_size) {
    out.problem = "stored record's sizes differ (" + std::to_string(e.compressed_size) + " stored, " +
                  std::to_string(e.uncompressed_size) + " declared)";
    return;
  }
  for (uint64_t done = 0; done < e.compressed_size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), e.compressed_size - done));
    source.read_at(e.data_offset + done, buf.data(), n);
    sink.add(buf.data(), n);
    done += n;
  }
}

void read_deflated(const ByteSource& source, const ZipEntry& e, std::vector<unsigned char>& buf, ContentSink& sink,
                   RecordDigest& out) {
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw std::bad_alloc();
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  std::vector<unsigned char> in(std::min<uint64_t>(kChunk / 4, std::max<uint64_t>(e.compressed_size, 1)));
  uint64_t consumed = 0;
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    if (z.avail_in == 0) {
      if (consumed == e.compressed_size) {
        out.problem = "compressed data ends early";
        return;
      }
      const size_t n = static_cast<size_t>(std::min<uint64_t>(in.size(), e.compressed_size - consumed));
      source.read_at(e.data_offset + consumed, in.data(), n);
      consumed += n;
      z.next_in = in.data();
      z.avail_in = static_cast<uInt>(n);
    }
    z.next_out = buf.data();
    z.avail_out = static_cast<uInt>(buf.size());
    status = inflate(&z, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
      out.problem = std::string("compressed data is corrupt (") + (z.msg != nullptr ? z.msg : "inflate failed") + ")";
      return;
    }
    const size_t produced = buf.size() - z.avail_out;
    if (sink.size + produced > e.uncompressed_size) {
      out.problem = "inflates to more than its declared " + std::to_string(e.uncompressed_size) + " bytes";
      return;
    }
    sink.add(buf.data(), produced);
    if (status == Z_BUF_ERROR && produced == 0 && z.avail_in == 0 && consumed == e.compressed_size) {
      out.problem = "compressed data ends early";
      return;
    }
  }
}

RecordDigest digest_one(const ByteSource& source, const Record& record, std::vector<unsigned char>& buf) {
  const ZipEntry& e = *record.entry;
  RecordDigest out;
  out.name = record.name;
  ContentSink sink;
  if (e.method == 0) {
    read_stored(source, e, buf, sink, out);
  } else if (e.method == 8) {
    read_deflated(source, e, buf, sink, out);
  } else {
    out.problem = "compression method '" + zip_method_name(e.method) + "' is not one PyTorch reads";
  }
  out.size = sink.size;
  if (!out.problem.empty()) return out;
  if (sink.size != e.uncompressed_size) {
    out.problem = "holds " + std::to_string(sink.size) + " bytes, not its declared " + std::to_string(e.uncompressed_size);
    return out;
  }
  out.sha256 = sink.sha.hex();
  out.crc_ok = sink.crc == e.crc32;
  if (!out.crc_ok) out.problem = "CRC-32 does not match its content (the bytes changed after it was written)";
  return out;
}

}  // namespace

std::vector<RecordDigest> digest_records(const TorchArchive& archive, const DigestOptions& options) {
  std::vector<const Record*> todo;
  for (const Record& r : archive.records()) {
    if (r.entry->is_directory()) continue;
    if (std::find(options.exclude.begin(), options.exclude.end(), r.name) != options.exclude.end()) continue;
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
  auto worker = [&] {
    std::vector<unsigned char> buf(kChunk);
    for (size_t i; (i = next.fetch_add(1)) < order.size();) {
      try {
        results[order[i]] = digest_one(source, *todo[order[i]], buf);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = order.size();
      }
    }
  };
  unsigned threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, std::max<size_t>(order.size(), 1)));
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

}  // namespace tsarchive
