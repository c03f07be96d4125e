#include "cli/output.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "base/error.h"
#include "core/edit/file_edit.h"
#include "core/inspect/inspect.h"
#include "base/utf8.h"

namespace tsarchive::cli {

namespace {

bool g_color = false;  // color_stderr()

const char* paint(const char* prefix, const char* sgr) {
  static thread_local std::string painted;
  if (!g_color) return prefix;
  painted = std::string("\033[") + sgr + "m" + prefix + "\033[0m";
  return painted.c_str();
}

}  // namespace

bool choose_color(const std::string& when, int fd) {
  if (when == "always") return true;
  if (when == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  return (no_color == nullptr || *no_color == '\0') && (term == nullptr || std::string(term) != "dumb") &&
         ::isatty(fd) == 1;
}

void color_stderr(bool on) { g_color = on; }

bool color_out(const Context& ctx) {
  return ctx.color == "always" || (ctx.color == "auto" && out_is_terminal(ctx) && choose_color("auto", STDOUT_FILENO));
}

std::string painted(std::string_view text, const char* sgr) {
  return std::string("\033[") + sgr + "m" + std::string(text) + "\033[0m";
}

void print_error(std::ostream& err, const Error& e) {
  err << paint("tsarchive: error:", "1;31") << ' ' << printable(e.what());
  if (!e.file().empty()) err << " (" << printable(e.file()) << ")";
  if (!e.hint().empty()) err << ": " << printable(e.hint());
  err << '\n';
}

void print_warning(std::ostream& err, std::string_view what, std::string_view file) {
  err << paint("tsarchive: warning:", "1;33") << ' ' << printable(what);
  if (!file.empty()) err << " (" << printable(file) << ")";
  err << '\n';
}

void print_note(std::ostream& err, std::string_view note) {
  err << paint("tsarchive: note:", "1;36") << ' ' << printable(note) << '\n';
}

NoteSink notes_on(std::ostream& err) {
  return [&err](const std::string& note) { print_note(err, note); };
}

Error current_error() {
  try {
    throw;
  } catch (const Error& e) {
    return e;
  } catch (const std::bad_alloc&) {
    return Error(ErrorKind::Internal, "out of memory", {},
                 "free memory or give the machine more; if the input is small, it may be hostile: report it");
  } catch (const std::exception& e) {
    return Error(ErrorKind::Internal, std::string("internal error: ") + e.what(), {},
                 "please report this with the command and the input file");
  } catch (...) {
    return Error(ErrorKind::Internal, "internal error: an unknown exception", {},
                 "please report this with the command and the input file");
  }
}

namespace {

const char* kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::CheckFailed: return "check_failed";
    case ErrorKind::Usage: return "usage";
    case ErrorKind::BadInput: return "bad_input";
    case ErrorKind::Io: return "io";
    case ErrorKind::Torch: return "torch";
    case ErrorKind::Internal: return "internal";
    case ErrorKind::SignatureInvalid: return "signature_invalid";
    case ErrorKind::UnsafeToLoad: return "unsafe_to_load";
  }
  return "internal";
}

}  // namespace

nlohmann::ordered_json number_or_null(const std::optional<double>& x) {
  return x && std::isfinite(*x) ? nlohmann::ordered_json(*x) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json error_to_json(const Error& e) {
  return {{"schema", "tsarchive.error/1"}, {"kind", kind_name(e.kind())}, {"file", e.file()},
          {"message", e.what()},           {"hint", e.hint()},              {"exit_code", e.exit_code()}};
}

int report_current_exception(std::ostream& err, bool verbose, std::ostream* json_out, int indent) {
  const Error e = current_error();
  // libtorch's full text quotes the model (its exception messages, its
  // code): escaped as every other text from an archive, keeping its lines.
  if (verbose && !e.detail().empty()) err << escape_text(e.detail(), TextEscape::Block) << '\n';
  print_error(err, e);
  if (json_out != nullptr) *json_out << json_text(error_to_json(e), indent) << '\n';
  return e.exit_code();
}

std::ostream& report_stream(Context& ctx, bool data_on_stdout) {
  return data_on_stdout && !ctx.quiet ? ctx.err : ctx.out;
}

bool out_is_terminal(const Context& ctx) {
  return ctx.out.rdbuf() == std::cout.rdbuf() && ::isatty(STDOUT_FILENO) == 1;
}

void refuse_binary_on_terminal(const Context& ctx, const std::string& flag, const std::string& what) {
  if (ctx.data.rdbuf() != std::cout.rdbuf() || ::isatty(STDOUT_FILENO) != 1) return;
  throw_usage(flag + " writes " + what + ", binary, to standard output, which is a terminal: not writing it there",
              "pipe it (| ...) or redirect it (> FILE), or give a file name");
}



void write_content(Context& ctx, std::string_view bytes, const std::string& what, const std::string& raw_hint) {
  if (!out_is_terminal(ctx)) {
    ctx.out << bytes;
    return;
  }
  if (!is_printable_utf8(bytes)) {
    throw_usage(printable(what) + " is binary (" + std::to_string(bytes.size()) + " bytes); not printing it to a terminal",
                raw_hint);
  }
  if (needs_escape(bytes, TextEscape::Block)) {
    print_note(ctx.err, what + " has control, C1 or bidi characters: shown escaped (\\x1b, \\r, \\u202e); " + raw_hint +
                            " for the exact bytes");
    ctx.out << escape_text(bytes, TextEscape::Block);
    return;
  }
  ctx.out << bytes;
}

void write_output_file(Context& ctx, const std::string& path, std::string_view bytes) {
  if (is_standard_stream(path)) {
    ctx.data << bytes;
    return;
  }
  write_file_atomically(path, bytes);
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.3f" : ms < 1000 ? "%.2f" : "%.0f", ms);
  return buf;
}

std::string plural(uint64_t n, const char* word) { return with_commas(n) + " " + word + (n == 1 ? "" : "s"); }

namespace detail {

namespace {

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

bool valid_utf8(const std::string& s) { return is_valid_utf8(s); }

std::string mark_invalid_utf8(const std::string& s, const std::string& marker) {
  if (valid_utf8(s)) return s;
  std::string out;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t len = utf8_sequence_at(s, i, cp);
    if (len == 0) {
      const auto b = static_cast<unsigned char>(s[i]);
      out += marker;
      out += kHex[b >> 4];
      out += kHex[b & 15];
      ++i;
    } else {
      out.append(s, i, len);
      i += len;
    }
  }
  return out;
}

std::string unmark_invalid_utf8(const std::string& text, const std::string& marker) {
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t m = text.find(marker, at);
    if (m == std::string::npos || m + marker.size() + 2 > text.size()) break;
    out.append(text, at, m - at);
    out += "\\udc";
    out.append(text, m + marker.size(), 2);
    at = m + marker.size() + 2;
  }
  out.append(text, at, std::string::npos);
  return out;
}

}  // namespace detail

size_t display_width(std::string_view s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80 ? 1 : 0;
  return w;
}

TextTable::TextTable(std::vector<std::string> headers, std::vector<Align> align)
    : headers_(std::move(headers)), align_(std::move(align)) {
  align_.resize(headers_.size(), Align::Left);
}

void TextTable::add_cell(std::string cell) {
  if (needs_escape(cell, TextEscape::Line)) cell = printable(cell);
  widths_.push_back(display_width(cell));
  cells_.push_back(std::move(cell));
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (std::string& cell : cells) add_cell(std::move(cell));
}

void TextTable::add_row(std::initializer_list<std::string_view> cells) {
  const size_t columns = headers_.size();
  auto it = cells.begin();
  for (size_t c = 0; c < columns; ++c) add_cell(it != cells.end() ? std::string(*it++) : std::string());
}

void TextTable::reserve(size_t rows) {
  cells_.reserve(rows * headers_.size());
  widths_.reserve(rows * headers_.size());
}

void TextTable::print(std::ostream& out, int indent) const {
  const size_t columns = headers_.size();
  std::vector<size_t> header_widths(columns);
  for (size_t c = 0; c < columns; ++c) header_widths[c] = display_width(headers_[c]);
  std::vector<size_t> width = header_widths;
  for (size_t i = 0; i < widths_.size(); ++i) width[i % columns] = std::max(width[i % columns], widths_[i]);
  std::string line;  // one buffer for every line
  auto print_line = [&](const std::string* cells, const size_t* widths) {
    line.assign(static_cast<size_t>(indent), ' ');
    for (size_t c = 0; c < columns; ++c) {
      const size_t pad = width[c] - widths[c];
      if (c > 0) line.append(2, ' ');
      if (align_[c] == Align::Right) line.append(pad, ' ');
      line.append(cells[c]);
      if (align_[c] == Align::Left && c + 1 < columns) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    line.push_back('\n');
    out.write(line.data(), static_cast<std::streamsize>(line.size()));
  };
  print_line(headers_.data(), header_widths.data());
  for (size_t i = 0; i < cells_.size(); i += columns) print_line(&cells_[i], &widths_[i]);
}

}  // namespace tsarchive::cli
