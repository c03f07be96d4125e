// Entry content, read from the bytes our layout points at (see zip.h): the one
// reader behind ZipArchive::read and the digests of verify and stamp.
#include <zlib.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "format/crc32.h"
#include "format/zip.h"

namespace tsarchive {
namespace {

constexpr size_t kOutChunk = 1 << 20;  // uncompressed bytes handed to the sink at a time
constexpr size_t kInChunk = 256 << 10;  // compressed bytes read at a time

// Grows `buf` to min(want, cap) bytes (at least 1) and returns that size.
size_t reserve_chunk(std::vector<unsigned char>& buf, uint64_t want, size_t cap) {
  const size_t n = static_cast<size_t>(std::max<uint64_t>(1, std::min<uint64_t>(want, cap)));
  if (buf.size() < n) buf.resize(n);
  return n;
}

// One thread that takes the CRC-32 of the chunks handed to it, in order: one
// thread per record, not one per chunk (a 1 GiB record is 1,024 chunks).
class CrcBeside {
 public:
  explicit CrcBeside(uint32_t crc) : crc_(crc), thread_([this] { run(); }) {}
  CrcBeside(const CrcBeside&) = delete;
  CrcBeside& operator=(const CrcBeside&) = delete;
  ~CrcBeside() { finish(); }

  // Hands over a chunk once the previous one is done: the caller may then
  // reuse the previous chunk's buffer.
  void hand(const unsigned char* data, size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return chunk_ == nullptr; });
    chunk_ = data;
    size_ = n;
    changed_.notify_all();
  }

  // The CRC of everything handed over, once it is done.
  uint32_t finish() {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return chunk_ == nullptr; });
      done_ = true;
      changed_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    return crc_;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return chunk_ != nullptr || done_; });
      if (chunk_ == nullptr) return;
      const unsigned char* const data = chunk_;
      const size_t n = size_;
      lock.unlock();
      const uint32_t crc = crc32_update(crc_, data, n);
      lock.lock();
      crc_ = crc;
      chunk_ = nullptr;  // its buffer is free again
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  const unsigned char* chunk_ = nullptr;  // handed over, not yet done
  size_t size_ = 0;
  bool done_ = false;
  uint32_t crc_;
  std::thread thread_;  // last: starts once the members above are set
};

}  // namespace

ZipEntryReader::ZipEntryReader(const ByteSource& source) : source_(source) {}

// Chunk k is read into buffer k % 2 while the CRC of chunk k - 1 may still run
// on the second thread; the sink takes chunk k on this thread; chunk k + 1
// reuses buffer (k + 1) % 2 only after chunk k - 1's CRC is done (handing
// chunk k over waited for it).
void ZipEntryReader::read_stored_crc_beside(const ZipEntry& e, const Sink& sink, uint32_t& crc, ZipContentCheck& out) {
  const size_t chunk = reserve_chunk(out_, e.compressed_size, kOutChunk);
  second_.resize(chunk);
  unsigned char* const buffers[2] = {out_.data(), second_.data()};
  CrcBeside beside(crc);  // its destructor waits for it: it reads our buffers
  size_t k = 0;
  for (uint64_t done = 0; done < e.compressed_size; ++k) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, e.compressed_size - done));
    unsigned char* const buffer = buffers[k % 2];
    source_.read_at(e.data_offset + done, buffer, n);
    beside.hand(buffer, n);
    out.size += n;
    sink(buffer, n);
    done += n;
  }
  crc = beside.finish();
}

ZipContentCheck ZipEntryReader::read(const ZipEntry& e, const Sink& sink, unsigned char* stored_into) {
  ZipContentCheck out;
  uint32_t crc = 0;
  auto deliver = [&](const unsigned char* data, size_t n) {
    crc = crc32_update(crc, data, n);
    out.size += n;
    sink(data, n);
  };
  if (e.method == 0) {
    if (e.compressed_size != e.uncompressed_size) {
      out.problem = "stored record's sizes differ (" + std::to_string(e.compressed_size) + " stored, " +
                    std::to_string(e.uncompressed_size) + " declared)";
      return out;
    }
    if (stored_into != nullptr) {
      source_.read_at(e.data_offset, stored_into, static_cast<size_t>(e.compressed_size));
      deliver(stored_into, static_cast<size_t>(e.compressed_size));
    } else if (crc_beside_sink_ && e.compressed_size > 2 * kOutChunk) {
      read_stored_crc_beside(e, sink, crc, out);
    } else {
      const size_t chunk = reserve_chunk(out_, e.compressed_size, kOutChunk);
      for (uint64_t done = 0; done < e.compressed_size;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, e.compressed_size - done));
        source_.read_at(e.data_offset + done, out_.data(), n);
        deliver(out_.data(), n);
        done += n;
      }
    }
  } else if (e.method == 8) {
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw std::bad_alloc();
    std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
    const size_t in_chunk = reserve_chunk(in_, e.compressed_size, kInChunk);
    // One byte more than declared fits, so content longer than declared shows.
    const size_t out_chunk = reserve_chunk(out_, e.uncompressed_size + 1, kOutChunk);
    uint64_t consumed = 0;
    for (;;) {
      if (z.avail_in == 0 && consumed < e.compressed_size) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(in_chunk, e.compressed_size - consumed));
        source_.read_at(e.data_offset + consumed, in_.data(), n);
        consumed += n;
        z.next_in = in_.data();
        z.avail_in = static_cast<uInt>(n);
      }
      z.next_out = out_.data();
      z.avail_out = static_cast<uInt>(out_chunk);
      const int status = inflate(&z, Z_NO_FLUSH);
      if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
        out.problem = std::string("compressed data is corrupt (") + (z.msg != nullptr ? z.msg : "inflate failed") + ")";
        return out;
      }
      const size_t produced = out_chunk - z.avail_out;
      if (out.size + produced > e.uncompressed_size) {
        out.problem = "inflates to more than its declared " + std::to_string(e.uncompressed_size) + " bytes";
        return out;
      }
      deliver(out_.data(), produced);
      if (status == Z_STREAM_END) break;
      // Room for output was left, all input is in, and the stream has not ended.
      if (z.avail_out != 0 && z.avail_in == 0 && consumed == e.compressed_size) {
        out.problem = "compressed data ends early";
        return out;
      }
    }
  } else {
    out.problem = "compression method '" + zip_method_name(e.method) + "' is not one PyTorch reads";
    return out;
  }
  if (out.size != e.uncompressed_size) {
    out.problem = "holds " + std::to_string(out.size) + " bytes, not its declared " + std::to_string(e.uncompressed_size);
    return out;
  }
  out.crc_ok = crc == e.crc32;
  if (!out.crc_ok) out.problem = "CRC-32 does not match its content (the bytes changed after it was written)";
  return out;
}

}  // namespace tsarchive
