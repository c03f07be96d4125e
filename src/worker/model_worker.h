// A long-lived libtorch worker for `serve`: one process per loaded model that
// loads it once and answers many calls over a pipe.
//
// The one-shot worker (worker.h) forks the calling process; a server forks
// from many threads, and a forked copy of a threaded process may only call
// async-signal-safe functions until it execs. So a model worker is the
// tsarchive binary itself, exec'd as `tsarchive __model-worker IN OUT NOTES
// [TEMP]`, the descriptors of its request and reply pipes and of its notes
// pipe (worker_output.h), and its temporary folder (sandbox.h; absent with
// TSARCHIVE_NO_SANDBOX=1), which the server makes and removes. Its stdout and
// stderr are a pipe the server reads and writes to its own stderr escaped, so
// nothing libtorch or the model prints can break the protocol or reach the
// server's log raw; no other descriptor of the server's survives the exec. The
// archive the core checked stays open across the exec: the worker loads it
// by /proc/self/fd/N, never by path.
//
// Frames: 8 bytes of little-endian length, then the payload of
// worker_codec.h. The first request is the ServeModelRequest, answered by the
// model's ServedModelInfo (or the Error its load threw); every later one is
// a one-byte kind, then: 'I' a list of input values (HostValue: tensors and
// JSON-like values), answered by the output
// tensors (or an Error); 'S' nothing, answered by the model's ServedStats.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "contract/serve.h"
#include "worker/sandbox.h"
#include "worker/worker.h"
#include "worker/worker_output.h"

namespace tsarchive {

// A worker's reply longer than its caller would hold (ModelWorker::infer's
// max_reply_bytes): it was read and dropped, the worker still serves.
class ReplyTooLarge : public Error {
 public:
  ReplyTooLarge(uint64_t reply_bytes, uint64_t max_reply_bytes, const std::string& file)
      : Error(ErrorKind::Torch, "the model's outputs take " + std::to_string(reply_bytes) + " bytes, more than the " +
                                    std::to_string(max_reply_bytes) + " the request may still hold", file),
        reply_bytes_(reply_bytes) {}
  uint64_t reply_bytes() const { return reply_bytes_; }

 private:
  uint64_t reply_bytes_;
};

class ModelWorker {
 public:
  // `executable`: the tsarchive binary ("/proc/self/exe" in the server).
  ModelWorker(WorkerJob job, ServeModelRequest request, std::string executable = "/proc/self/exe");
  ~ModelWorker();
  ModelWorker(const ModelWorker&) = delete;
  ModelWorker& operator=(const ModelWorker&) = delete;

  // Starts the worker and waits until it has loaded the model (within the
  // job's time and memory limits). Throws the load's Error as the worker
  // threw it, or Error(Torch) when the worker died or could not start.
  ServedModelInfo start();

  // One call. Throws the model's Error (the worker lives on: alive() stays
  // true), or Error(Torch) naming the signal or limit when the worker died
  // (alive() is then false; start() again). A reply longer than
  // `max_reply_bytes` is not kept: ReplyTooLarge as soon as its length is
  // read, after the reply is read and dropped (the worker lives on).
  std::vector<NamedTensor> infer(const std::vector<HostValue>& inputs, uint64_t max_reply_bytes = UINT64_MAX);
  // The sampled operators and API usage keys so far (--sample). Throws as
  // infer() does.
  ServedStats stats();

  bool alive() const { return pid_.load() > 0; }
  // Between calls: whether the worker has ended (it is then reaped and
  // alive() is false); `why` says how ("libtorch crashed with SIGKILL").
  bool ended(std::string& why);
  // Between calls: whether the worker passed its memory or disk limit (it
  // is then stopped and alive() is false); `why` says which. A model's thread
  // may go on allocating or writing while no request is in flight.
  bool stopped_at_limit(std::string& why);
  pid_t pid() const { return pid_.load(); }
  // SIGKILL to the worker, from any thread, while its owner may be in a call
  // (which then sees the pipe close). Reaping stays the owner's.
  void kill() const;
  // Kills the worker (SIGKILL) and reaps it.
  void stop();

 private:
  // A reply longer than `max_reply_bytes` is ReplyTooLarge: after it was read
  // and dropped when `drain` (the worker can answer the next call), at once
  // when not (the caller stops the worker).
  std::string call(std::string payload, const std::string& activity, uint64_t max_reply_bytes = UINT64_MAX,
                   bool drain = true);
  // Why the running worker is past its memory limit (its resident memory
  // and the `held` bytes of its reply read so far) or disk limit, "" when it
  // is not (the disk is looked at every 100 ms at most: disk_use.h).
  std::string over_limit(uint64_t held = 0);
  [[noreturn]] void died(int status, const std::string& activity, const std::string& why);
  // Waits for the worker to end and returns its status; pid_ is -1 before
  // the process is reaped, so kill() never signals a pid that was reused.
  int reap();

  WorkerJob job_;
  ServeModelRequest request_;
  std::string executable_;
  std::atomic<pid_t> pid_{-1};  // read by kill() on another thread
  std::chrono::steady_clock::time_point disk_looked_{};
  uint64_t files_in_memory_ = 0;  // its memfds and files on a tmpfs, as of the last look (disk_use.h)
  int to_worker_ = -1;
  int from_worker_ = -1;
  std::unique_ptr<WorkerTempFolder> temp_;  // the running worker's, removed once it is reaped
  std::unique_ptr<OutputRelay> relay_;      // the running worker's output, to the server's stderr
};

// The worker's side: what `tsarchive __model-worker` runs; it enters the
// sandbox first, with `temp` (may be null: no sandbox) as TMPDIR and the one
// folder it writes. Returns the exit status (0 when the server closed the pipe).
int model_worker_main(int in_fd, int out_fd, int notes_fd, const char* temp);

}  // namespace tsarchive
