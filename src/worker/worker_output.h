// What a worker process prints, kept off the user's stdout and escaped.
//
// libtorch and the model's own code write to the worker's standard output and
// error: TorchScript's print() (std::cout), c10's logging, and native code of
// custom operators and AOTInductor packages (fds 1 and 2). The worker inherits
// the user's stdout, where a report or --json goes, and their terminal, so
// unescaped bytes from the file's author would corrupt the JSON and could fake
// tsarchive's own lines or drive the terminal. WorkerOutput makes fds 1 and 2
// a pipe; a thread reads it and writes each line escaped (terminal_text.h),
// as "tsarchive: model output: LINE", to the real stderr, at most
// kMaxForwarded bytes of it. tsarchive's own notes (std::cerr) keep going to
// the real stderr directly.
#pragma once

#include <cstddef>
#include <memory>

namespace tsarchive {

class WorkerOutput {
 public:
  static constexpr size_t kMaxForwarded = 256 * 1024;

  // Call once in the worker, after the sandbox (the thread inherits it) and
  // before libtorch runs anything. Without a pipe it leaves the fds as they are.
  WorkerOutput();
  // Forwards what is left and ends the thread: call before _exit.
  void finish();
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput&) = delete;
  WorkerOutput& operator=(const WorkerOutput&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tsarchive
