// libtorch runs in a worker process, never in the tsarchive process itself.
//
// libtorch 1.13 crashes, reads past buffers and allocates without bound on
// damaged archives, and the core's checks (gate.h) can only refuse the damage
// they know. So every call into the torch layer is made by a child forked for
// it: the child loads the torch layer, does the work, sends the result back
// over a pipe as data (worker_codec.h) and ends with _exit. The parent loads
// no libtorch; it reads the pipe and watches the child's resident memory and
// running time, kills it when it passes a limit, and turns a signal, a limit
// or a missing result into one Error(Torch) line (exit 5). The parent never
// runs libtorch code, so nothing libtorch does can crash it or leave its files
// half-written.
//
// Resident memory, not address space, is limited: CUDA reserves terabytes of
// address space it never touches. The limit counts the child's anonymous
// resident memory (heap and tensors; not the shared libraries' pages), read
// from /proc every 20 ms. What it writes is bounded too (disk_use.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "contract/torch_backend.h"
#include "core/edit/file_edit.h"  // WatchedFile
#include "worker/worker_codec.h"

namespace tsarchive {

// Loads the torch layer on first use (torch_loader.cc), in the worker. Throws Error(Torch) when it cannot be
// found or loaded, saying where it looked. Set TSARCHIVE_TORCH_LIBRARY to a
// path to override the search.
TorchBackend& load_torch_backend();

// Where load_torch_backend() looks for the torch layer, without loading it:
// TSARCHIVE_TORCH_LIBRARY when set, else next to the binary (a build tree),
// then LIBDIR/tsarchive/ beside the binary's bin/ (an install, wherever its prefix).
struct TorchLayerLocation {
  std::string path;                // the first of `tried` that exists; empty when none does
  std::vector<std::string> tried;  // in order
  bool from_environment = false;   // `tried` is TSARCHIVE_TORCH_LIBRARY alone
};
TorchLayerLocation locate_torch_layer();

struct WorkerLimits {
  uint64_t memory_bytes = 0;  // anonymous resident memory; 0: no limit
  double time_s = 0;          // wall-clock seconds; 0: no limit
  uint64_t disk_bytes = 0;    // what it holds on disk (disk_use.h); 0: no limit but the count of files
};

// What the child does, for the one line that reports its end.
struct WorkerJob {
  std::string file;      // the archive as the user named it
  std::string activity;  // "loading the module", "running forward", ...
  WorkerLimits limits;
  bool validated = true;  // false with --no-validate: the message says so
  std::vector<std::string> libraries;  // --load-library: dlopen()ed in the worker after the torch layer
  // Folders libtorch writes into (stamp's, trace's, convert's staging folder):
  // the sandbox (sandbox.h) lets the worker write there and in its own
  // temporary folder, nowhere else.
  std::vector<std::string> writable;
  // An AOTInductor package runs: code compiled for one GPU, CUDA and PyTorch,
  // which a crash's message names as the likely cause. libtorch unpacks it
  // into a /tmp folder the worker reserves for it (sandbox.h).
  bool compiled_package = false;
  // The job uses a CUDA device: the worker starts the NVIDIA driver before it
  // enters the sandbox (sandbox.h says why and what that leaves).
  bool cuda = false;
  // The checked archive: a result is kept only when it did not change (and a
  // served model's worker restarts only then). fd -1: nothing watched.
  WatchedFile archive;
};

// In a worker (run_in_worker's `work`): from now on it is doing `activity`
// ("preparing the inputs"), which the line that reports a limit or a crash
// names instead of the job's; "" goes back to the job's. Does nothing
// outside a worker.
void announce_worker_activity(const std::string& activity);

// Error(Io) naming `job.file` when its archive changed since it was checked.
void check_archive_unchanged(const WorkerJob& job);

// Runs `work` in a worker process, sandboxed (sandbox.h) with TMPDIR set to
// a temporary folder of its own that is removed after it, and returns the
// payload it returned
// (worker_codec.h; an Error it throws is encoded by the worker). `load`, when
// given, runs in the worker before the sandbox (sandbox.h: the torch layer,
// whose folders the sandbox then lets it read). Error(Torch) when the worker
// is killed by a signal or a limit, exits without a payload, or cannot be started.
std::string run_in_worker(const WorkerJob& job, const std::function<std::string()>& work,
                          const std::function<void()>& load = {});

// Loads the job's --load-library libraries (RTLD_GLOBAL, after libtorch);
// Error(Torch) naming the one that does not load.
void load_job_libraries(const WorkerJob& job);

// What operations call: `work(TorchBackend&)` runs in a worker that loads the
// torch layer; its `Result` travels back through worker_codec.h, and an Error
// it throws is thrown again here as it was.
template <class Result, class Work>
Result in_worker(const WorkerJob& job, Work&& work) {
  const std::string payload = run_in_worker(
      job,
      [&] {
        TorchBackend& torch = load_torch_backend();
        load_job_libraries(job);
        return encode_result(Result(work(torch)));
      },
      [] { load_torch_backend(); });
  return decode_result<Result>(payload);
}

// Shared with the model worker (model_worker.h): "SIGSEGV (Segmentation
// fault)", and what a worker's limits count from /proc/PID/status.
std::string signal_text(int sig);
struct WorkerUsage {
  uint64_t resident_bytes = 0;  // anonymous and shared memory, not the libraries' pages (--memory-limit)
  uint64_t threads = 0;
};
WorkerUsage worker_usage(pid_t pid);  // zeros when it is gone
// Threads a worker may run at once: libtorch starts one per core for each
// of its pools, CUDA a few. More is a worker taking the user's process slots
// (ulimit -u), which tsarchive stops whatever the memory they take.
uint64_t max_worker_threads();
// Whether a worker's usage passes `memory_limit` (0: none, with `held` bytes
// of its reply counted beside its memory) or max_worker_threads(): the one
// line saying which, and what the user can do.
struct UsagePassed {
  std::string why;   // "" when it passes neither
  std::string hint;
  explicit operator bool() const { return !why.empty(); }
};
UsagePassed worker_usage_passed(const WorkerUsage& usage, uint64_t held, uint64_t memory_limit);

// Set TSARCHIVE_IN_PROCESS=1 to call libtorch in this process (for a debugger,
// or to measure what the worker costs); the limits then do not apply.
bool worker_disabled();

}  // namespace tsarchive
