// Safe writes (core/edit/file_edit.h for the protocol).
//
// Journal of an --in-place edit, ".<name>.tsarchive-journal":
//   "tsarchive-journal 2\n"
//   u64 dev, u64 ino  the archive it belongs to (st_dev, st_ino)
//   u64 offset      first byte the edit rewrites
//   u64 old_size    of the file before the edit
//   u64 new_size    of the file after it
//   u32 new_crc     CRC-32 of the new bytes [offset, new_size)
//   u64 n           length of the old bytes that follow
//   n bytes         the old bytes [offset, old_size)
//   u32 crc         CRC-32 of everything above
// All integers little-endian. The CRC only detects a torn journal: anyone who
// can write the folder can make one that matches. So a journal is applied only
// by a command that edits (never by one that reads), and only when it passes
// trusted_journal_problem(): see file_edit.h for the trust model.
#include "core/edit/file_edit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/posix_fd.h"
#include "base/strings.h"
#include "base/temp_files_and_locks.h"
#include "core/edit/output_paths.h"
#include "format/zip_format.h"

namespace tsarchive {

using namespace posix;

namespace {

constexpr std::string_view kJournalMagic = "tsarchive-journal 2\n";
constexpr std::string_view kJournalMagicV1 = "tsarchive-journal 1\n";

std::string journal_path_of(const std::string& dir, const std::string& base) {
  return dir + "/." + base + ".tsarchive-journal";
}

// No journal tsarchive writes is larger: --in-place rewrites at most what the
// caller allows (64 MiB for extra), plus the header.
constexpr uint64_t kJournalMaxSize = (1ull << 32);

// Why a journal in folder `dir` could have been written by someone other than
// `owner` (the archive's owner), or "" when it could not: a folder others can
// write to without the sticky bit lets them replace any file in it, and the
// owner of a folder may do anything in it.
std::string journal_folder_problem(const struct stat& dir, uid_t owner) {
  if ((dir.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (dir.st_mode & S_ISVTX) == 0) {
    return "its folder is writable by others and has no sticky bit";
  }
  if (dir.st_uid != owner && dir.st_uid != 0) {
    return "its folder belongs to uid " + std::to_string(dir.st_uid) + ", not to the archive's owner";
  }
  return "";
}

}  // namespace

ArchiveFile::ArchiveFile(const std::string& path, FileAccess access, double lock_timeout_seconds)
    : path_(path), access_(access) {
  if (is_standard_stream(path) && writes(access)) {
    throw_usage("standard input ('-') cannot be edited: this command changes the archive it reads",
                "give the archive as a file, or write the result elsewhere with -o FILE where the command has it");
  }
  open_and_lock(lock_timeout_seconds);
  struct stat journal {};
  if (!is_standard_stream(path) && ::lstat(journal_path().c_str(), &journal) == 0) {
    if (!writes(access_)) {
      notes_.push_back(interrupted_edit_note(path_));
    } else {
      recover_interrupted_edit();
    }
  }
  if (writes(access_)) remove_stale_temp_files();
  if (access_ == FileAccess::ReadHeld) hold_contents();
  if (access_ == FileAccess::EditInPlace) opened_state_ = settled_file_state(fd_, path_, ErrorKind::Io, &opened_);
}

ArchiveFile::~ArchiveFile() {
  if (copy_fd_ >= 0) ::close(copy_fd_);
  if (fd_ >= 0) ::close(fd_);  // also releases the locks and the lease
}

void ArchiveFile::open_and_lock(double lock_timeout_seconds) {
  const int flags = access_ == FileAccess::EditInPlace ? O_RDWR : O_RDONLY;
  lock_deadline_ = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(lock_timeout_seconds));
  const char* wait_hint = "wait for it to finish, or give it longer with --lock-timeout SECONDS";
  while (true) {
    if (access_ == FileAccess::EditInPlace) {
      // A reader holds a read lease while libtorch reads the file (WatchedFile):
      // an open for writing would stop it as if the file had been written.
      // Wait for readers on a read-only descriptor first, as the lock below would.
      struct stat st {};
      const Fd probe(open_regular_file(path_, O_RDONLY, &st));
      wait_for_lock([&] { return content_lock_free(probe.get(), F_WRLCK); },
                    "another process is reading this file (it holds a read lock), and --in-place changes bytes it "
                    "may be reading",
                    "wait for it to finish, give it longer with --lock-timeout SECONDS, or leave out --in-place");
    }
    fd_ = open_regular_file(path_, flags, &opened_);
    if (is_standard_stream(path_)) {  // a copy of its own, or a file given as stdin: only a reader's lock
      wait_for_lock([&] { return try_content_lock(fd_, F_RDLCK, path_); },
                    "another process is editing this file in place (it holds the write lock)", wait_hint);
      return;
    }
    char resolved[PATH_MAX];
    if (::realpath(path_.c_str(), resolved) == nullptr) throw_io("cannot resolve the path: " + errno_text(), path_);
    target_ = resolved;
    std::tie(dir_, base_) = split_path(target_);

    if (!writes(access_)) {
      wait_for_lock([&] { return try_content_lock(fd_, F_RDLCK, path_); },
                    "another process is editing this file in place (it holds the write lock)", wait_hint);
    } else {
      wait_for_lock([&] { return try_flock(fd_, path_); }, "another process is editing this file (it holds the lock)",
                    wait_hint);
      if (access_ == FileAccess::EditInPlace) {
        wait_for_lock([&] { return try_content_lock(fd_, F_WRLCK, path_); },
                      "another process is reading this file (it holds a read lock), and --in-place changes bytes it "
                      "may be reading",
                      "wait for it to finish, give it longer with --lock-timeout SECONDS, or leave out --in-place");
      }
    }
    // The lock is on the inode we opened; an editor that held it may have
    // renamed a new file over the path. Then lock that one instead.
    struct stat now {};
    if (::stat(target_.c_str(), &now) == 0 && same_file(now, opened_)) {
      ::fstat(fd_, &opened_);
      return;
    }
    ::close(fd_);
    fd_ = -1;
  }
}

template <class TryLock>
void ArchiveFile::wait_for_lock(TryLock try_lock, const char* busy, const char* hint) const {
  while (!try_lock()) {
    if (std::chrono::steady_clock::now() >= lock_deadline_) throw_io(busy, path_, hint);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool WatchedFile::take_lease() {
  // The lease break's signal: its default action would end tsarchive.
  static const bool sigio_ignored = std::signal(SIGIO, SIG_IGN) != SIG_ERR;
  leased = sigio_ignored && fd >= 0 && ::fcntl(fd, F_SETLEASE, F_RDLCK) == 0;
  return leased;
}

void WatchedFile::release_lease() {
  if (leased) ::fcntl(fd, F_SETLEASE, F_UNLCK);
  leased = false;
}

bool WatchedFile::unchanged() const {
  // While a writer waits, the lease reads as what it is being broken to.
  if (leased && ::fcntl(fd, F_GETLEASE) != F_RDLCK) return false;
  FileState now;
  return current_file_state(fd, now) && now == state;
}

WatchedFile ArchiveFile::watched() const {
  const struct stat& st = read_stat();
  return WatchedFile{read_fd(), FileState::of(st), leased_};
}

WatchedFile ArchiveFile::watched_settled(ErrorKind if_written) const {
  WatchedFile w = watched();
  const uint64_t opened_size = w.state.size;
  w.state = settled_file_state(w.fd, path_, if_written);
  // Only the size: source() reads as many bytes as the file had when it was
  // opened. A change of its times alone (a write of the same size, or a
  // rename over its path, which unlinks it) is before the reads begin.
  if (w.state.size != opened_size) {
    throw Error(if_written, "it was written since it was opened (its size changed)", path_,
                "run again when nothing writes it");
  }
  return w;
}

std::unique_ptr<ByteSource> ArchiveFile::source() const {
  const int fd = ::fcntl(read_fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw_io("cannot read: " + errno_text(), path_);
  return make_fd_source(fd, static_cast<uint64_t>(read_stat().st_size), path_);
}

// Before anything reads the file. A time check alone (WatchedFile) misses a
// writer that already holds the file mapped shared and writable: writes
// through pages it has dirtied change neither ctime nor mtime. A read lease
// is granted only while nobody holds the file open for writing (a mapping
// counts), and from then on a new writer waits and breaks it, which
// unchanged() sees. Where the kernel refuses one, the checks and libtorch
// read a private copy instead; unless only root could write the file (the
// usual deployment: the model root's, the server another user's), since
// root can change this process's memory as well.
void ArchiveFile::hold_contents() {
  WatchedFile file = watched();
  if (file.take_lease()) {
    leased_ = true;
    return;
  }
  const int why = errno;
  const bool only_root_writes = opened_.st_uid == 0 && (opened_.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  if (why != EAGAIN && only_root_writes) return;
  copy_fd_ = private_copy(fd_, static_cast<uint64_t>(opened_.st_size), path_);
  if (::fstat(copy_fd_, &copy_) != 0) throw_io("cannot stat the private copy: " + errno_text(), path_);
  const std::string reason = why == EAGAIN ? "another process has it open for writing"
                             : why == EACCES ? "it is another user's, who could write it while it is read"
                                             : std::string("the file system does not hold it still (no read lease: ") +
                                                   std::strerror(why) + ")";
  notes_.push_back(path_ + ": " + reason + "; its " + human_size(static_cast<uint64_t>(opened_.st_size)) +
                   " were copied into a private temporary file ($TMPDIR), which the checks and libtorch read");
}

std::string ArchiveFile::journal_path() const { return journal_path_of(dir_, base_); }

void ArchiveFile::remove_stale_temp_files() {
  const int removed = remove_leftovers(dir_, base_);
  if (removed > 0) {
    notes_.push_back("removed " + std::to_string(removed) + " temp file(s) left by an interrupted edit of " + path_);
  }
}

void ArchiveFile::recover_interrupted_edit() {
  const std::string journal_path = this->journal_path();
  // The bytes readers may be reading change: take the write lock they respect.
  // An in-place editor holds it on fd_ already (a second open file would
  // conflict with it); any other editor opens the file for writing here.
  Fd own;
  int fd = fd_;
  if (access_ != FileAccess::EditInPlace) {
    struct stat st {};
    own = Fd(open_regular_file(target_, O_RDWR, &st));
    if (!same_file(st, opened_)) throw_io("the file was replaced while it was being opened", path_, "run the command again");
    fd = own.get();
    wait_for_lock([&] { return try_content_lock(fd, F_WRLCK, path_); },
                  "another process is reading this file, and finishing an interrupted --in-place edit changes its bytes",
                  "wait for it to finish, or give it longer with --lock-timeout SECONDS");
  }

  const Journal journal = read_trusted_journal(journal_path);
  const auto size = static_cast<uint64_t>(opened_.st_size);
  bool completed = false;
  if (size == journal.new_size && journal.new_size >= journal.offset) {
    completed = zipfmt::crc32(pread_exact(fd, journal.offset, journal.new_size - journal.offset, path_)) == journal.new_crc;
  }
  if (!completed) {
    pwrite_all(fd, journal.old_tail, journal.offset, path_);
    if (::ftruncate(fd, static_cast<off_t>(journal.old_size)) != 0) {
      throw_io("cannot restore the file: " + errno_text(), path_);
    }
    fsync_or_throw(fd, path_);
  }
  if (::unlink(journal_path.c_str()) != 0) throw_io("cannot remove the journal: " + errno_text(), journal_path);
  fsync_dir(dir_);
  notes_.push_back(completed ? "an interrupted --in-place edit of " + path_ + " had finished writing; kept it"
                             : "undid an interrupted --in-place edit of " + path_ + "; it is as it was before");
  ::fstat(fd_, &opened_);
}

// A journal is trusted only when nobody but the archive's owner could have
// written it: see file_edit.h. Anything else is left where it is and named.
ArchiveFile::Journal ArchiveFile::read_trusted_journal(const std::string& journal_path) const {
  const auto untrusted = [&](const std::string& why) {
    throw_io("found the journal of an --in-place edit that tsarchive cannot trust (" + why + "); left it alone",
             journal_path,
             "if no --in-place edit of yours was interrupted, remove it by hand; otherwise check the archive with "
             "'tsarchive verify' first");
  };
  struct stat dir {};
  if (::stat(dir_.c_str(), &dir) != 0) throw_io("cannot check the folder: " + errno_text(), dir_);
  const std::string folder = journal_folder_problem(dir, opened_.st_uid);
  if (!folder.empty()) untrusted(folder);

  Fd jfd(::open(journal_path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (jfd.get() < 0) {
    if (errno == ELOOP) untrusted("it is a symbolic link");
    throw_io("cannot open the journal: " + errno_text(), journal_path);
  }
  struct stat jst {};
  if (::fstat(jfd.get(), &jst) != 0) throw_io("cannot read the journal: " + errno_text(), journal_path);
  if (!S_ISREG(jst.st_mode)) untrusted("it is not a regular file");
  if (jst.st_uid != opened_.st_uid) {
    untrusted("it belongs to uid " + std::to_string(jst.st_uid) + ", the archive to uid " +
              std::to_string(opened_.st_uid));
  }
  if (jst.st_nlink != 1) untrusted("it has " + std::to_string(jst.st_nlink) + " hard links");
  if ((jst.st_mode & (S_IWGRP | S_IWOTH)) != 0) untrusted("others may write to it");
  if (static_cast<uint64_t>(jst.st_size) > kJournalMaxSize) untrusted("it is larger than any journal tsarchive writes");
  const std::string bytes = pread_exact(jfd.get(), 0, static_cast<uint64_t>(jst.st_size), journal_path);

  if (bytes.compare(0, kJournalMagicV1.size(), kJournalMagicV1) == 0) {
    untrusted("an older tsarchive wrote it, without the archive's identity");
  }
  const auto damaged = [&] { untrusted("it is damaged or not a tsarchive journal"); };
  if (bytes.size() < kJournalMagic.size() + 8 * 6 + 4 * 2 || bytes.compare(0, kJournalMagic.size(), kJournalMagic) != 0) {
    damaged();
  }
  ByteReader r(bytes, "journal");
  r.skip(kJournalMagic.size());
  Journal j;
  const uint64_t dev = r.u64(), ino = r.u64();
  j.offset = r.u64();
  j.old_size = r.u64();
  j.new_size = r.u64();
  j.new_crc = r.u32();
  const uint64_t n = r.u64();
  if (n > r.remaining() || r.remaining() - n != 4) damaged();
  j.old_tail = std::string(r.bytes(n));
  const uint32_t crc = r.u32();
  if (crc != zipfmt::crc32(std::string_view(bytes).substr(0, bytes.size() - 4)) || j.offset + n != j.old_size) damaged();
  if (dev != static_cast<uint64_t>(opened_.st_dev) || ino != static_cast<uint64_t>(opened_.st_ino)) {
    untrusted("it belongs to another file (device " + std::to_string(dev) + ", inode " + std::to_string(ino) + ")");
  }
  // Killed while writing, the file is between its old and its new size.
  const auto size = static_cast<uint64_t>(opened_.st_size);
  if (size < std::min(j.old_size, j.new_size) || size > std::max(j.old_size, j.new_size) || j.new_size < j.offset) {
    untrusted("the archive's size, " + std::to_string(size) + " bytes, is neither its old " +
              std::to_string(j.old_size) + " nor its new " + std::to_string(j.new_size) + " nor between them");
  }
  return j;
}

WriteResult ArchiveFile::replace(const ZipRewritePlan& plan, int plan_source_fd) {
  if (plan_source_fd < 0 && plan.identical_to(static_cast<uint64_t>(opened_.st_size))) {
    return WriteResult{false, false, 0, plan.size, {}};
  }
  TempFile temp(dir_, base_, path_);
  write_plan(plan, plan_source_fd < 0 ? fd_ : plan_source_fd, temp.fd(), path_);
  return commit_over_this(temp, WriteResult{true, false, plan.size, plan.size, {}});
}

std::optional<WriteResult> ArchiveFile::replace(const StagedFile& staged) {
  struct stat st {};
  if (::fstat(staged.fd, &st) != 0 || st.st_dev != opened_.st_dev) return std::nullopt;
  TempFile temp(TempFile::Adopt{}, staged.fd, staged.path, path_);
  return commit_over_this(temp, WriteResult{true, false, staged.bytes_written, static_cast<uint64_t>(st.st_size), {}});
}

WriteResult ArchiveFile::commit_over_this(TempFile& temp, WriteResult result) {
  // The model replaced keeps its own mode, set-id bits included (man page
  // FILES): they were its owner's choice for this file, not copied onto another.
  temp.set_mode(opened_.st_mode, &opened_);
  // And its extended attributes; what a rename cannot keep is said.
  const std::vector<std::string> lost = temp.copy_attributes_from(fd_);
  if (!lost.empty()) {
    result.notes.push_back("the new file could not be given the model's extended attribute(s) " + some_names(lost, 5) +
                           " (this user may not set them); the edit went on without them");
  }
  if (opened_.st_nlink > 1) {
    result.notes.push_back(path_ + " had " + std::to_string(opened_.st_nlink) +
                           " hard links: this name now holds the edited file, the other names keep the old one");
  }
  if ((opened_.st_mode & 0222) == 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(opened_.st_mode & 07777));
    result.notes.push_back(path_ + " was read-only (mode " + mode +
                           "); its folder lets it be replaced, as mv would: it was, and is read-only again");
  }
  struct stat now {};
  if (::stat(target_.c_str(), &now) != 0 || !unchanged(now, opened_)) {
    throw_io("the file changed while it was being edited; nothing was written", path_,
             "another program wrote to it; run the command again");
  }
  temp.commit(target_, dir_);
  ::fstat(fd_, &opened_);
  return result;
}

ArchiveFile::Output ArchiveFile::open_output(const std::string& out_path) const {
  refuse_link_output(out_path);  // -o used to be written through (realpath, then rename over the target)
  Output out;
  out.exists = ::stat(out_path.c_str(), &out.existing) == 0;
  if (out.exists && S_ISDIR(out.existing.st_mode)) throw_usage("-o names a folder: " + out_path, "give a file path");
  if (out.exists) refuse_special_output("-o " + out_path, out.existing);  // never opened: a pipe's open blocks
  out.target = out_path;
  if (out.exists) {
    if (same_file(out.existing, opened_)) throw_usage("-o names the input file", "leave out -o to edit it in place");
    out.lock = std::make_unique<ArchiveFile>(out_path, FileAccess::Edit, 0);  // also cleans its stale temp files
    out.target = out.lock->target_;
  }
  std::tie(out.dir, out.base) = split_path(out.target);
  if (!out.exists) remove_leftovers(out.dir, out.base);  // the lock did it for an existing file
  return out;
}

void ArchiveFile::commit_output(TempFile& temp, const Output& out) const {
  if (out.exists) {
    temp.set_mode(out.existing.st_mode, &out.existing);
  } else {
    // A new file takes the input's permissions, never its setuid, setgid or
    // sticky bits (set_mode without an owner drops them): those are the input
    // author's to choose, and a run as root would make a set-id file of
    // root's (review 57a, F5).
    temp.set_mode(opened_.st_mode & ~current_umask(), nullptr);
  }
  temp.commit(out.target, out.dir);
}

WriteResult ArchiveFile::write_new(const ZipRewritePlan& plan, const std::string& out_path, int plan_source_fd) const {
  const Output out = open_output(out_path);
  TempFile temp(out.dir, out.base, out_path);
  write_plan(plan, plan_source_fd < 0 ? fd_ : plan_source_fd, temp.fd(), out_path);
  commit_output(temp, out);
  return WriteResult{true, false, plan.size, plan.size, {}};
}

std::optional<WriteResult> ArchiveFile::write_new(const StagedFile& staged, const std::string& out_path) const {
  const Output out = open_output(out_path);
  struct stat st {}, dir {};
  if (::fstat(staged.fd, &st) != 0 || ::stat(out.dir.c_str(), &dir) != 0 || st.st_dev != dir.st_dev) return std::nullopt;
  TempFile temp(TempFile::Adopt{}, staged.fd, staged.path, out_path);
  commit_output(temp, out);
  return WriteResult{true, false, staged.bytes_written, static_cast<uint64_t>(st.st_size), {}};
}

WriteResult ArchiveFile::write_stream(const ZipRewritePlan& plan,
                                      const std::function<void(std::string_view)>& write) const {
  constexpr uint64_t kPiece = 4u << 20;
  for (const ZipPiece& p : plan.pieces) {
    if (!p.from_source) {
      write(p.bytes);
      continue;
    }
    for (uint64_t done = 0; done < p.length;) {
      const uint64_t n = std::min(kPiece, p.length - done);
      write(pread_exact(fd_, p.source_offset + done, n, path_));
      done += n;
    }
  }
  return WriteResult{true, false, plan.size, plan.size, {}};
}

InPlaceEdit ArchiveFile::prepare_in_place(const ZipRewritePlan& plan, uint64_t max_rewrite) {
  // Only old bytes are counted: they are read, journaled and rewritten.
  if (access_ != FileAccess::EditInPlace) throw_usage("internal: file not opened for an in-place edit");
  struct stat dir {};
  if (::stat(dir_.c_str(), &dir) != 0) throw_io("cannot check the folder: " + errno_text(), dir_);
  const std::string folder = journal_folder_problem(dir, opened_.st_uid);
  if (!folder.empty()) {
    throw_usage("--in-place keeps a journal next to the file, and here nobody could trust it: " + folder + " (" +
                    dir_ + ")",
                "leave out --in-place: the edit then replaces the file atomically");
  }
  const auto old_size = static_cast<uint64_t>(opened_.st_size);
  const uint64_t offset = plan.first_change;
  if (old_size - offset > max_rewrite) {
    throw_usage("--in-place would rewrite " + std::to_string(old_size - offset) + " of the file's " +
                    std::to_string(old_size) + " bytes: the edit changes a record that other records follow",
                "leave out --in-place; it is quick for new names and for the records tsarchive appended");
  }
  std::string old_tail = pread_exact(fd_, offset, old_size - offset, path_);
  std::string new_tail = render_plan(plan, offset, [&](uint64_t at, char* out, size_t n) {
    if (at >= offset) {
      std::memcpy(out, old_tail.data() + (at - offset), n);  // will be overwritten on disk
    } else {
      const std::string bytes = pread_exact(fd_, at, n, path_);
      std::memcpy(out, bytes.data(), n);
    }
  });
  return InPlaceEdit(*this, offset, old_size, std::move(old_tail), std::move(new_tail));
}

WriteResult ArchiveFile::write_in_place(const ZipRewritePlan& plan, uint64_t max_rewrite) {
  if (plan.identical_to(static_cast<uint64_t>(opened_.st_size))) return WriteResult{false, true, 0, plan.size, {}};
  InPlaceEdit edit = prepare_in_place(plan, max_rewrite);
  edit.check_unchanged();
  SignalHold hold;
  edit.write_journal();
  try {
    edit.check_unchanged();  // again, now that the journal holds the bytes it read
  } catch (...) {
    edit.finish_quietly();
    throw;
  }
  try {
    edit.apply();
  } catch (const Error&) {
    edit.undo();  // e.g. the disk filled up half-way: put the old bytes back
    throw;
  }
  edit.finish();
  ::fstat(fd_, &opened_);
  opened_state_ = FileState::of(opened_);
  return WriteResult{true, true, edit.bytes(), plan.size, {}};
}

void InPlaceEdit::check_unchanged() const {
  FileState now;
  const bool same = current_file_state(file_->fd_, now) && now == file_->opened_state_ &&
                    pread_exact(file_->fd_, offset_, old_tail_.size(), file_->path_) == old_tail_;
  if (!same) {
    throw_io("the file changed while it was being edited: a program wrote it without tsarchive's lock; nothing was "
             "written",
             file_->path_, "edit it again when nothing else writes it");
  }
}

void InPlaceEdit::write_journal() {
  std::string journal(kJournalMagic);
  zipfmt::put64(journal, static_cast<uint64_t>(file_->opened_.st_dev));
  zipfmt::put64(journal, static_cast<uint64_t>(file_->opened_.st_ino));
  zipfmt::put64(journal, offset_);
  zipfmt::put64(journal, old_size_);
  zipfmt::put64(journal, offset_ + new_tail_.size());
  zipfmt::put32(journal, zipfmt::crc32(new_tail_));
  zipfmt::put64(journal, old_tail_.size());
  journal += old_tail_;
  zipfmt::put32(journal, zipfmt::crc32(journal));
  const std::string journal_path = file_->journal_path();
  TempFile temp(file_->dir_, file_->base_, file_->path_);
  temp.set_mode(S_IRUSR | S_IWUSR, &file_->opened_);  // the archive's owner's alone: see the trust model
  pwrite_all(temp.fd(), journal, 0, journal_path);
  temp.commit(journal_path, file_->dir_);
}

void InPlaceEdit::apply() {
  const int fd = file_->fd_;
  pwrite_all(fd, new_tail_, offset_, file_->path_);
  const uint64_t new_size = offset_ + new_tail_.size();
  if (new_size < old_size_ && ::ftruncate(fd, static_cast<off_t>(new_size)) != 0) {
    throw_io("cannot shorten the file: " + errno_text(), file_->path_);
  }
  fsync_or_throw(fd, file_->path_);
}

void InPlaceEdit::undo() noexcept {
  const int fd = file_->fd_;
  size_t done = 0;
  while (done < old_tail_.size()) {
    const ssize_t n = ::pwrite(fd, old_tail_.data() + done, old_tail_.size() - done, static_cast<off_t>(offset_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the journal stays; the next edit of the file restores it
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd, static_cast<off_t>(old_size_)) != 0 || ::fsync(fd) != 0) return;
  finish_quietly();
}

void InPlaceEdit::finish_quietly() noexcept {
  const std::string journal_path = file_->journal_path();
  if (::unlink(journal_path.c_str()) == 0) fsync_dir(file_->dir_);
}

void InPlaceEdit::finish() {
  const std::string journal_path = file_->journal_path();
  if (::unlink(journal_path.c_str()) != 0) throw_io("cannot remove the journal: " + errno_text(), journal_path);
  fsync_dir(file_->dir_);
}

std::string interrupted_edit_note(const std::string& path) {
  if (is_standard_stream(path)) return "";
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return "";
  const auto [dir, base] = split_path(resolved);
  const std::string journal = journal_path_of(dir, base);
  struct stat st {};
  if (::lstat(journal.c_str(), &st) != 0) return "";
  return "an interrupted --in-place edit left a journal next to " + path + " (" + journal +
         "); commands that only read leave it alone, and the next edit of the file finishes or undoes it";
}

// Outputs are never symbolic links (output_paths.h): a link made after the
// command's own check is refused here too, rather than replaced.
void write_file_atomically(const std::string& path, const std::function<void(const ChunkWriter&)>& produce) {
  refuse_link_output(path);
  struct stat existing {};
  const bool exists = ::stat(path.c_str(), &existing) == 0;
  if (exists) refuse_special_output(path, existing);
  if (exists && !S_ISREG(existing.st_mode)) throw_io("not a regular file; refusing to replace it", path);
  const auto [dir, base] = split_path(path);
  remove_leftovers(dir, base);
  TempFile temp(dir, base, path, "or give a path in a folder you can write to");
  temp.set_mode(exists ? existing.st_mode : 0666 & ~current_umask(), exists ? &existing : nullptr);
  uint64_t offset = 0;
  produce([&](std::string_view chunk) {
    pwrite_all(temp.fd(), chunk, offset, path);
    offset += chunk.size();
  });
  temp.commit(path, dir);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  write_file_atomically(path, [&](const ChunkWriter& write) { write(bytes); });
}

}  // namespace tsarchive
