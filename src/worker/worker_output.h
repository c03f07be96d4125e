// What a worker process prints, kept off the user's stdout and escaped by
// the parent.
//
// libtorch and the model's own code write to the worker's standard output and
// error: TorchScript's print() (std::cout), c10's logging, and native code of
// custom operators and AOTInductor packages (fds 1 and 2). The user's stdout
// is where a report or --json goes, and their stderr is often a terminal, so
// unescaped bytes from the file's author would corrupt the JSON and could fake
// tsarchive's own lines or drive the terminal (OSC 52 writes the clipboard).
// Escaping inside the worker is not enough: native code there can write to
// any descriptor the worker holds. So the worker holds none of the user's:
// its fds 1 and 2 are a pipe, its fd 0 is /dev/null, every other inherited
// descriptor is closed (close_inherited_descriptors), and libtorch's notes
// (TSARCHIVE_WORKER_NOTES_FD, and the tsarchive code's std::cerr) go to a
// second pipe. The parent reads both on a thread of its own and writes each
// line escaped (terminal_text.h) to its stderr: the model's as
// "tsarchive: model output: LINE", at most kMaxForwarded bytes; a notes line
// as it is when it is one of tsarchive's notes, else as model output (native
// code can write to that pipe too).
#pragma once

#include <cstddef>
#include <memory>

namespace tsarchive {

class OutputRelay {
 public:
  static constexpr size_t kMaxForwarded = 256 * 1024;

  // Makes the two pipes; Error(Torch) when it cannot.
  OutputRelay();
  // Stops the thread (finish()) and closes what is left.
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // In the child, between fork and its work or exec; async-signal-safe. Fds 0,
  // 1 and 2 become /dev/null and the output pipe; returns the notes pipe's
  // write end (kept across an exec when `across_exec`), or -1 when a step failed.
  int attach_child(bool across_exec) const noexcept;
  // The number attach_child() returns, for an exec's arguments.
  int child_notes_descriptor() const;
  // In the parent, after the fork: closes the child's ends and starts the
  // thread that forwards what the child writes to `stderr_fd`.
  void start(int stderr_fd);
  // Once the child has ended (or was killed): forwards what is left in the
  // pipes, then stops the thread. Native code can leave a copy of a pipe in
  // no other process (the sandbox refuses new processes), but the thread does
  // not wait for an end of file it may not get.
  void finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// In the worker, once, before libtorch: tsarchive's std::cerr and libtorch's
// notes (TSARCHIVE_WORKER_NOTES_FD) write to `notes_fd`.
void use_notes_descriptor(int notes_fd);

// In a child about to run code it does not trust: closes every descriptor
// from 3 up except those in `keep` (-1 entries are ignored; at most 8).
// Async-signal-safe.
void close_inherited_descriptors(const int* keep, size_t count) noexcept;

// In the worker, for the archive's descriptor it keeps: the same file opened
// afresh (read-only) in its place, so that it shares no open file description
// with the parent's. Locks (flock, OFD locks) and leases belong to a
// description: on a shared one, native code in the worker could release the
// parent's lock and let another writer in. False when the file cannot be
// opened again (the descriptor is then left as it was).
bool reopen_own_description(int fd) noexcept;

}  // namespace tsarchive
