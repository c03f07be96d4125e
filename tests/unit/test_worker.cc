// The libtorch worker's process mechanics (worker.h) with plain functions in
// place of libtorch: results and errors come back, and a crash, a memory
// hog, a hang or a silent exit becomes one Error(Torch). Also the codec that
// carries results over the pipe (worker_codec.h) and the limit options.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <fstream>
#include <system_error>
#include <thread>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <fcntl.h>
#include <malloc.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/posix_fd.h"
#include "core/edit/file_edit.h"
#include "helpers.h"
#include "operations/worker_settings.h"
#include "contract/jit.h"
#include "contract/run.h"
#include "worker/worker.h"
#include "worker/worker_codec.h"

using namespace tsarchive;

namespace {

WorkerJob job(uint64_t memory_bytes = 0, double time_s = 0) {
  WorkerJob job;
  job.file = "model.pt";
  job.activity = "running forward";
  job.limits.memory_bytes = memory_bytes;
  job.limits.time_s = time_s;
  return job;
}

}  // namespace

TEST_CASE("a worker's result comes back as it was returned", "[worker]") {
  const std::string big(3 << 20, 'x');  // larger than a pipe's buffer
  const pid_t parent = getpid();
  CHECK(run_in_worker(job(), [&] { return big; }) == big);
  // The work ran in another process, and the caller's process goes on.
  const std::string worker_pid = run_in_worker(job(), [] { return std::to_string(getpid()); });
  CHECK(worker_pid != std::to_string(parent));
  CHECK(getpid() == parent);
}

TEST_CASE("an Error thrown in the worker is thrown again in the parent", "[worker]") {
  const Error e = error_of([] {
    decode_result<std::string>(run_in_worker(job(), [] {
      return encode_error(Error(ErrorKind::Usage, "forward takes 1 input, 2 given", "m.pt", "drop one --input")
                              .with_detail("full libtorch text"));
    }));
  });
  CHECK(e.kind() == ErrorKind::Usage);
  CHECK(std::string(e.what()) == "forward takes 1 input, 2 given");
  CHECK(e.file() == "m.pt");
  CHECK(e.hint() == "drop one --input");
  CHECK(e.detail() == "full libtorch text");
}

TEST_CASE("a worker killed by a signal is one libtorch error naming the signal", "[worker]") {
  const Error e = error_of([] {
    run_in_worker(job(), []() -> std::string {
      std::raise(SIGSEGV);
      return "unreachable";
    });
  });
  CHECK(e.kind() == ErrorKind::Torch);
  CHECK_THAT(e.what(), Catch::Contains("libtorch crashed with SIGSEGV") && Catch::Contains("while running forward") &&
                           Catch::Contains("passed tsarchive's checks") && !Catch::Contains("hostile"));
  CHECK(e.file() == "model.pt");
  CHECK_THAT(e.hint(), !Catch::Contains("do not deploy"));

  WorkerJob unchecked = job();
  unchecked.validated = false;
  const Error u = error_of([&] { run_in_worker(unchecked, []() -> std::string { std::abort(); }); });
  CHECK_THAT(u.what(), Catch::Contains("SIGABRT") && Catch::Contains("--no-validate"));
}

TEST_CASE("a crash running a checked AOTInductor package names its compiled code, not the file, as the cause",
          "[worker]") {
  WorkerJob package = job();
  package.compiled_package = true;
  const Error e = error_of([&] {
    run_in_worker(package, []() -> std::string {
      std::raise(SIGSEGV);
      return "unreachable";
    });
  });
  CHECK_THAT(e.what(), Catch::Contains("libtorch crashed with SIGSEGV") && Catch::Contains("passed tsarchive's checks") &&
                           Catch::Contains("another GPU, CUDA or PyTorch") && !Catch::Contains("hostile") &&
                           !Catch::Contains("corrupt"));
  CHECK_THAT(e.hint(), Catch::Contains("aoti_load_package") && !Catch::Contains("do not deploy"));
}

TEST_CASE("a worker killed by SIGILL is said to run code compiled for another CPU", "[worker]") {
  const Error e = error_of([] {
    run_in_worker(job(), []() -> std::string {
      std::raise(SIGILL);
      return "unreachable";
    });
  });
  CHECK_THAT(e.what(), Catch::Contains("SIGILL") && !Catch::Contains("hostile"));
  CHECK_THAT(e.hint(), Catch::Contains("built for a CPU with features this one lacks"));
}

TEST_CASE("a worker that passes the memory limit is stopped", "[worker]") {
  const Error e = error_of([] {
    run_in_worker(job(64u << 20), []() -> std::string {
      // Touch 1 GiB, a page at a time, slowly enough for the 20 ms checks.
      for (int i = 0; i < 1024; ++i) {
        char* block = static_cast<char*>(std::malloc(1 << 20));
        std::memset(block, 1, 1 << 20);
        ::usleep(1000);
      }
      return "finished";
    });
  });
  CHECK(e.kind() == ErrorKind::Torch);
  CHECK_THAT(e.what(), Catch::Contains("memory limit (64.0 MiB resident, --memory-limit)"));
}

TEST_CASE("a worker that starts thousands of threads is stopped (the user's process slots)", "[worker]") {
  const uint64_t many = max_worker_threads() + 64;
  std::string started;
  std::optional<Error> stopped;
  try {
    started = run_in_worker(job(0, 60), [many]() -> std::string {
      for (uint64_t i = 0; i < many; ++i) {
        try {
          std::thread([] { ::sleep(60); }).detach();
        } catch (const std::system_error&) {
          return "only " + std::to_string(i) + " threads could start";  // ulimit -u: nothing to check here
        }
      }
      ::sleep(60);
      return "finished";
    });
  } catch (const Error& e) {
    stopped = e;
  }
  if (started.rfind("only ", 0) == 0) {
    WARN(started);
    return;
  }
  REQUIRE(stopped);
  CHECK(stopped->kind() == ErrorKind::Torch);
  CHECK_THAT(stopped->what(), Catch::Contains("started more than " + std::to_string(max_worker_threads()) + " threads"));
  CHECK_THAT(stopped->hint(), Catch::Contains("may be hostile"));
}

TEST_CASE("a worker that passes the time limit is stopped", "[worker]") {
  const Error e = error_of([] {
    run_in_worker(job(0, 0.2), []() -> std::string {
      ::sleep(60);
      return "finished";
    });
  });
  CHECK(e.kind() == ErrorKind::Torch);
  CHECK_THAT(e.what(), Catch::Contains("time limit (0.2 s, --time-limit)"));
}

TEST_CASE("a worker that exits without a result is an error, not an empty result", "[worker]") {
  const Error e = error_of([] { run_in_worker(job(), []() -> std::string { ::_exit(3); }); });
  CHECK(e.kind() == ErrorKind::Torch);
  CHECK_THAT(e.what(), Catch::Contains("exit status 3") && Catch::Contains("without a result"));
}

TEST_CASE("results cross the pipe with every field, NaN, Inf and raw bytes", "[worker]") {
  RunReport r;
  r.libtorch_version = "1.13.1";
  r.device = "cuda:0";
  r.device_name = "NVIDIA H100";
  r.threads = 4;
  r.method = "forward";
  r.schema = "forward(Tensor x) -> Tensor";
  ValueSummary v;
  v.path = "out[0]";
  v.type = "Tensor";
  v.tensor = TensorSummary{"float32", {2, 3}, "cpu", 6, -1.5, std::numeric_limits<double>::infinity(), std::nan(""),
                           std::nullopt, 1, 2};
  v.integer = -7;
  v.depth = 1;
  r.outputs = {v};
  r.inputs = {v};
  r.first_call_ms = 12.5;
  OutputCheck c;
  c.path = "out";
  c.worst_index = {1, 2};
  c.actual = 0.5;
  r.checks = {c};
  r.timings = {TimedBatch{8, LatencySummary{100, 10, 1, 2, 3, 4, 5, 6, 7, 8}}};
  r.saved_inputs = std::string("PK\x03\x04\xff\xfe\0\x80", 8);
  r.saved_outputs = "\xc3\x28";  // not UTF-8
  r.notes = {"a note"};
  ProfileReport p;
  p.model_id = "m";
  p.calls = 3;
  p.observed.events = {OperatorEvent{"aten::addmm", "function", "m", 1, 10, 20, 5, "[[2, 8]]"}};
  p.observed.operators = {OperatorStats{"aten::addmm", "function", "m", "", 3, 60, 15, 20, 20}};
  p.trace_by = kTraceByKineto;
  p.kineto_trace = "{\"traceEvents\": []}";
  r.profile = p;
  r.api_usage = std::vector<std::string>{"torch.script.load"};

  const RunReport back = decode_result<RunReport>(encode_result(r));
  CHECK(back.device_name == r.device_name);
  CHECK(back.threads == 4);
  REQUIRE(back.outputs.size() == 1);
  CHECK(*back.outputs[0].integer == -7);
  CHECK(back.outputs[0].tensor->shape == std::vector<int64_t>{2, 3});
  CHECK(std::isinf(*back.outputs[0].tensor->max));
  CHECK(std::isnan(*back.outputs[0].tensor->mean));
  CHECK(!back.outputs[0].tensor->std);
  CHECK(back.outputs[0].tensor->inf == 2);
  CHECK(back.checks[0].worst_index == std::vector<int64_t>{1, 2});
  CHECK(back.timings[0].timing.p99_ms == 5);
  CHECK(back.saved_inputs == r.saved_inputs);
  CHECK(back.saved_outputs == r.saved_outputs);
  REQUIRE(back.profile);
  CHECK(back.profile->observed.events[0].input_shapes == "[[2, 8]]");
  CHECK(back.profile->observed.operators[0].self_ns == 15);
  CHECK(back.profile->trace_by == "kineto");
  CHECK(back.profile->kineto_trace == p.kineto_trace);
  CHECK(*back.api_usage == *r.api_usage);

  ConvertReport cr;
  cr.steps = {"eval", "freeze"};
  cr.warnings = {TraceWarning{"value-control-flow", "x decides a branch"}};
  cr.nodes_after = 42;
  const ConvertReport cback = decode_result<ConvertReport>(encode_result(cr));
  CHECK(cback.steps == cr.steps);
  CHECK(cback.warnings[0].message == "x decides a branch");
  CHECK(cback.nodes_after == 42);

  MethodGraph g;
  g.nodes = {GraphNode{"prim::If", "", "code/m.py:3", {0}, {1, 2}, -1, 0}};
  CHECK(decode_result<MethodGraph>(encode_result(g)).nodes[0].outputs == std::vector<int>{1, 2});

  CHECK_THROWS_AS(decode_result<RunReport>("not cbor"), Error);
  CHECK_THROWS_AS(decode_result<RunReport>(encode_result(std::string("a string, not a report"))), Error);
}

// {"result": <value>} in CBOR, as encode_result writes it, around `value`'s bytes.
std::string cbor_result(const std::string& value) { return std::string("\xa1\x66result", 8) + value; }

TEST_CASE("a worker's reply is measured before it is decoded: depth and values are bounded", "[worker]") {
  SECTION("100,000 nested arrays (from_cbor would overflow the stack)") {
    const Error e = error_of([] { decode_result<std::string>(cbor_result(std::string(100000, '\x81') + "\x60")); });
    CHECK(e.kind() == ErrorKind::Torch);
    CHECK_THAT(e.what(), Catch::Contains("nested deeper than 512 levels"));
  }
  SECTION("millions of one-byte empty maps (80 bytes each decoded)") {
    const uint64_t n = kMaxResultDecodedBytes / 80 + 1;
    std::string array = "\x9b";  // an array with an 8-byte count
    for (int shift = 56; shift >= 0; shift -= 8) array += static_cast<char>((n >> shift) & 0xff);
    const Error e = error_of([&] { decode_result<std::string>(cbor_result(array + std::string(n, '\xa0'))); });
    CHECK_THAT(e.what(), Catch::Contains("more than 128 MiB to decode"));
  }
  SECTION("a tensor's bytes are not counted: the reply already holds them") {
    HostValue big;
    big.kind = HostValue::Kind::Tensor;
    big.tensor.dtype = "uint8";
    big.tensor.shape = {int64_t{200} << 20};
    big.tensor.bytes = std::make_shared<const std::string>(size_t{200} << 20, '\x01');
    const std::string reply = encode_result(std::vector<HostValue>{big});
    CHECK(measure_cbor(reply, 512, kMaxResultDecodedBytes).well_formed);
  }
  SECTION("what to_cbor never writes, or bytes missing or left over") {
    for (const std::string& value : {std::string("\x9f\x60\xff"), std::string("\xc1\x00"), std::string("\x83\x60"),
                                    std::string("\x5a\xff\xff\xff\xff"), std::string("\x60\x60")}) {
      CHECK_FALSE(measure_cbor(cbor_result(value), 512, 100000).well_formed);
      CHECK_THAT(error_of([&] { decode_result<std::string>(cbor_result(value)); }).what(),
                 Catch::Contains("does not decode"));
    }
  }
  SECTION("what encode_result writes measures as it is") {
    const CborShape shape = measure_cbor(encode_result(std::string("ok")), 512, 100000);
    CHECK(shape.well_formed);
    CHECK(shape.values == 3);  // the map, its key, the string
    CHECK(shape.depth == 1);
    CHECK(decode_result<std::string>(cbor_result("\x62ok")) == "ok");
  }
}

// What malloc holds now (glibc: small blocks and mmapped ones).
uint64_t heap_in_use() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

TEST_CASE("measure_cbor's estimate is at least what from_cbor allocates", "[worker]") {
  const auto many = [](nlohmann::json item) {
    nlohmann::json all = nlohmann::json::array();
    for (int i = 0; i < 20000; ++i) all.push_back(item);
    return all;
  };
  const nlohmann::json host_int = {{"kind", 2}, {"value", 7}};
  for (const nlohmann::json& value :
       {many(nlohmann::json::object()), many(nlohmann::json::array()), many(1), many(""),
        many(std::string(40, 'x')), many(nlohmann::json::binary({})), many(nlohmann::json::binary({1, 2, 3})),
        many(host_int), many(nlohmann::json::array({nlohmann::json::array()})),
        many(nlohmann::json{{std::string(20, 'k'), nullptr}}), many(many(1)[0])}) {
    const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(value);
    const std::string bytes(cbor.begin(), cbor.end());
    const CborShape shape = measure_cbor(bytes, 512, UINT64_MAX);
    REQUIRE(shape.well_formed);
    const uint64_t before = heap_in_use();
    const nlohmann::json decoded = nlohmann::json::from_cbor(bytes);
    const uint64_t taken = heap_in_use() - before;
    INFO(value[0].dump() << ": estimated " << shape.decoded_bytes << ", taken " << taken);
    // Under a sanitizer mallinfo2 says nothing (taken is 0): nothing to hold the estimate to.
    if (taken == 0) continue;
    CHECK(taken <= shape.decoded_bytes + bytes.size());
    CHECK(shape.decoded_bytes <= taken * 2 + 64);  // not so careful it refuses real replies
  }
}

TEST_CASE("memory limits parse as sizes in powers of 1024", "[worker]") {
  CHECK(parse_memory_size("4096", "--memory-limit") == 4096);
  CHECK(parse_memory_size("512M", "--memory-limit") == 512ull << 20);
  CHECK(parse_memory_size("8G", "--memory-limit") == 8ull << 30);
  CHECK(parse_memory_size("8g", "--memory-limit") == 8ull << 30);
  CHECK(parse_memory_size("1.5GiB", "--memory-limit") == 3ull << 29);
  CHECK(parse_memory_size("2GB", "--memory-limit") == 2ull << 30);
  for (const char* bad : {"", "G", "-1G", "0", "12Q", "1.5 G", "1GG", "nan", "inf", "1e30T"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_memory_size(bad, "--memory-limit"), Error);
  }

  WorkerSettings options;
  CHECK(resolve_worker_limits(options, 0).memory_bytes <= 4ull << 30);
  CHECK(resolve_worker_limits(options, 0).time_s == 600);
  options.memory_limit = "none";
  CHECK(resolve_worker_limits(options, 1).memory_bytes == 0);
  options.memory_limit = "3G";
  CHECK(resolve_worker_limits(options, 1).memory_bytes == 3ull << 30);
}

TEST_CASE("a worker's result is dropped when the archive was written while it ran", "[worker]") {
  TempDir dir;
  const std::string path = dir.file("model.pt");
  { std::ofstream(path) << "checked bytes"; }
  const ArchiveFile file(path, FileAccess::Read, 1);
  WorkerJob watched = job();
  watched.archive = file.watched();
  CHECK(run_in_worker(watched, [] { return std::string("as checked"); }) == "as checked");

  // The same inode rewritten in place while the worker works: no lock stops it, its ctime tells.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ofstream(path, std::ios::in | std::ios::out) << "swapped";
  });
  const Error e = error_of([&] {
    run_in_worker(watched, [] {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      return std::string("what libtorch made of other bytes");
    });
  });
  writer.join();
  CHECK(e.kind() == ErrorKind::Io);
  CHECK_THAT(e.what(), Catch::Contains("was written while tsarchive used it"));
  // And before a (served model's) worker starts again.
  CHECK_THROWS_AS(check_archive_unchanged(watched), Error);
}

TEST_CASE("a worker cannot release the parent's lock on the archive: its descriptor is its own", "[worker]") {
  TempDir dir;
  const std::string path = dir.file("model.pt");
  { std::ofstream(path) << "checked bytes"; }
  const ArchiveFile file(path, FileAccess::Read, 1);  // holds a read lock (F_OFD_SETLK) on the content
  WorkerJob watched = job();
  watched.archive = file.watched();
  const auto lock = [](int fd, short type) {
    struct flock l {};
    l.l_type = type;
    l.l_whence = SEEK_SET;
    return ::fcntl(fd, F_OFD_SETLK, &l) == 0;
  };
  const int fd = watched.archive.fd;
  CHECK(run_in_worker(watched, [fd, &lock] {
          // What native code from the file would do to let a writer in.
          const bool unlocked = lock(fd, F_UNLCK) && ::flock(fd, LOCK_UN) == 0;
          char byte = 0;
          const bool reads = ::pread(fd, &byte, 1, 0) == 1 && byte == 'c';
          return std::string(unlocked && reads ? "unlocked its own" : "failed");
        }) == "unlocked its own");
  const Fd writer(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  CHECK_FALSE(lock(writer.get(), F_WRLCK));  // the parent's read lock still holds
}

TEST_CASE("a writer that opens the archive while a worker reads it waits until the worker is gone", "[worker]") {
  TempDir dir;
  const std::string path = dir.file("model.pt");
  { std::ofstream(path) << "checked bytes"; }
  const ArchiveFile file(path, FileAccess::Read, 1);
  WorkerJob leased = job();
  leased.archive = file.watched();
  leased.writable = {dir.path.string()};  // where the worker says who it is
  {
    WatchedFile probe = file.watched();
    if (!probe.take_lease()) {
      WARN("no read lease on this file system or for this user: a rewrite is only seen after the fact; skipped");
      return;
    }
    probe.release_lease();
  }
  const std::string pid_file = dir.file("worker.pid");
  // The writer is a process of its own (no thread of this one may be running
  // when run_in_worker forks): it exits 0 when the worker was gone by the time
  // its open for writing returned.
  const pid_t writer = ::fork();
  REQUIRE(writer >= 0);
  if (writer == 0) {
    struct stat st {};
    while (::stat(pid_file.c_str(), &st) != 0 || st.st_size == 0) ::usleep(5000);
    ::usleep(20000);  // the pid is written in full
    char text[32] = {};
    const int in = ::open(pid_file.c_str(), O_RDONLY | O_CLOEXEC);
    const ssize_t n = in >= 0 ? ::read(in, text, sizeof text - 1) : -1;
    const pid_t worker = n > 0 ? static_cast<pid_t>(std::atol(text)) : 0;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);  // waits on the lease
    const bool gone = worker > 0 && ::kill(worker, 0) != 0 && errno == ESRCH;
    const bool wrote = fd >= 0 && ::write(fd, "swapped", 7) == 7;
    ::_exit(gone && wrote ? 0 : 1);
  }
  const Error e = error_of([&] {
    run_in_worker(leased, [&] {
      { std::ofstream(pid_file) << ::getpid(); }
      std::this_thread::sleep_for(std::chrono::seconds(30));  // stopped long before
      return std::string("what libtorch made of other bytes");
    });
  });
  int status = 0;
  REQUIRE(::waitpid(writer, &status, 0) == writer);
  CHECK(e.kind() == ErrorKind::Io);
  CHECK_THAT(e.what(), Catch::Contains("was written while tsarchive used it"));
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

// Reads all of `source`.
std::string all_of(const ByteSource& source) {
  std::string bytes(static_cast<size_t>(source.size()), '\0');
  source.read_at(0, bytes.data(), bytes.size());
  return bytes;
}

TEST_CASE("ReadHeld: a writer that holds the file mapped before the checks cannot change what libtorch reads", "[worker]") {
  // Writes through a shared mapping whose page is already dirty change
  // neither ctime nor mtime: the time check alone would believe the file.
  TempDir dir;
  const std::string path = dir.file("model.pt");
  { std::ofstream(path) << "checked bytes"; }
  const Fd writer(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(writer.get() >= 0);
  void* mapped = ::mmap(nullptr, 13, PROT_READ | PROT_WRITE, MAP_SHARED, writer.get(), 0);
  REQUIRE(mapped != MAP_FAILED);
  static_cast<char*>(mapped)[0] = 'c';  // dirty: later writes through it leave the times as they are

  const ArchiveFile held(path, FileAccess::ReadHeld, 1);
  REQUIRE(held.notes().size() == 1);
  CHECK_THAT(held.notes().front(), Catch::Contains("another process has it open for writing") &&
                                       Catch::Contains("private temporary file"));
  std::memcpy(mapped, "swapped", 7);  // after the open, before libtorch reads it
  CHECK(all_of(*held.source()) == "checked bytes");
  const WatchedFile watched = held.watched();
  CHECK(watched.unchanged());
  char seen[13] = {};
  const Fd libtorch(::open(watched.descriptor_path().c_str(), O_RDONLY | O_CLOEXEC));  // as libtorch opens it
  REQUIRE(::pread(libtorch.get(), seen, sizeof seen, 0) == 13);
  CHECK(std::string(seen, 13) == "checked bytes");
  // Read leaves the file as it is: the swap is what a reader sees.
  const ArchiveFile plain(path, FileAccess::Read, 1);
  CHECK(all_of(*plain.source()).substr(0, 7) == "swapped");
  ::munmap(mapped, 13);
}

TEST_CASE("ReadHeld: with no writer the file itself is read, under a lease a writer breaks", "[worker]") {
  TempDir dir;
  const std::string path = dir.file("model.pt");
  { std::ofstream(path) << "checked bytes"; }
  const ArchiveFile held(path, FileAccess::ReadHeld, 1);
  const WatchedFile watched = held.watched();
  if (!watched.leased) {
    WARN("no read lease on this file system or for this user: the private copy is read instead; skipped");
    return;
  }
  CHECK(held.notes().empty());
  CHECK(watched.unchanged());
  // A writer's open breaks the lease (O_NONBLOCK: it does not wait for it here).
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  CHECK(fd < 0);
  CHECK(errno == EWOULDBLOCK);
  CHECK_FALSE(watched.unchanged());
}

TEST_CASE("ReadHeld: a sparse file held open for writing is not copied past half the free space", "[worker]") {
  TempDir dir;
  const std::string path = dir.file("model.pt");
  const Fd writer(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  REQUIRE(writer.get() >= 0);
  const off_t holes = off_t{1} << 43;  // 8 TiB of nothing
  if (::ftruncate(writer.get(), holes) != 0) {
    WARN("this file system takes no 8 TiB sparse file; skipped");
    return;
  }
  const Error e = error_of([&] { ArchiveFile held(path, FileAccess::ReadHeld, 1); });
  CHECK(e.kind() == ErrorKind::Io);
  CHECK_THAT(e.what(), Catch::Contains("no room for a private copy of the model"));
  CHECK_THAT(e.hint(), Catch::Contains("TMPDIR"));
}
