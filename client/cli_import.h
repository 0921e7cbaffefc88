// `mayfly item import DB CONTAINER FILE.jsonl`: one item per line, written with at most `concurrency` requests in
// flight through the exactly-once client (so the library's retries of a write whose outcome is unknown never apply
// it twice), with a progress bar on a terminal, periodic plain lines otherwise (none with --quiet), and a summary of
// the failures by status at the end. Memory is bounded: one line at a time is read, at most `concurrency` are held.
// Thread-safety: one thread (the Client's).
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "client/cli_output.h"
#include "client/client.h"

namespace mayfly::client {

inline constexpr size_t kJsonlLineMaxBytes = 4 * 1024 * 1024;  // twice the server's 2 MB item limit
inline constexpr size_t kImportFailureExamples = 10;           // failures listed line by line in the summary

// One line of a JSONL file: an item's JSON text, or why the line is not one (`error` non-empty).
struct JsonlLine {
  uint64_t line_number = 0;  // 1-based
  std::string text;          // the line, without its newline (and a trailing \r)
  uint64_t bytes = 0;        // bytes the line took in the file, newline included
  std::string error;
};

// Reads JSONL one line at a time, skipping blank lines. A line must be one JSON object; a line longer than
// max_line_bytes is reported (not held in memory) and skipped. A UTF-8 byte order mark on the first line is ignored.
class JsonlReader {
 public:
  explicit JsonlReader(std::istream& in, size_t max_line_bytes = kJsonlLineMaxBytes)
      : in_(in), max_line_bytes_(max_line_bytes) {}
  std::optional<JsonlLine> next();
  bool failed() const { return in_.bad(); }  // a read error (not the end of the input)

 private:
  std::istream& in_;
  size_t max_line_bytes_;
  uint64_t line_number_ = 0;
};

// What an import did: successes, and failures counted by status ("409", or "invalid" for a line that is not an
// item), with the first few kept for the report.
class ImportTally {
 public:
  void succeeded(uint64_t bytes);
  void failed(uint64_t line_number, uint64_t bytes, const std::string& status, const std::string& message);

  uint64_t succeeded_count() const { return succeeded_; }
  uint64_t failed_count() const { return failed_; }
  uint64_t done_bytes() const { return done_bytes_; }
  const std::map<std::string, uint64_t>& failures_by_status() const { return by_status_; }
  const std::vector<std::string>& failure_examples() const { return examples_; }

  // {"imported":N,"failed":M,"failuresByStatus":{"409":3},"seconds":S}
  std::string summary_json(double seconds) const;
  // "imported 998 items in 2.1 s (475 items/s); 2 failed: 409 conflict ×2" and the examples, one per line.
  std::string summary_text(double seconds) const;

 private:
  uint64_t succeeded_ = 0;
  uint64_t failed_ = 0;
  uint64_t done_bytes_ = 0;
  std::map<std::string, uint64_t> by_status_;
  std::vector<std::string> examples_;
};

// A status as the summary names it: "409 conflict", "429 throttled", ... ("invalid" stays as is).
std::string status_label(const std::string& status);

// Where an import stands, for its progress line.
struct ImportProgress {
  uint64_t items = 0;        // lines done (imported or failed)
  uint64_t failed = 0;
  uint64_t done_bytes = 0;   // of the lines done
  uint64_t total_bytes = 0;  // the file's size; 0: unknown (standard input)
  double seconds = 0;
};

// "[##########----------]  50%  1200 items  400 items/s  ETA 0:03  2 failed" (bar, percentage and ETA only when the
// size is known).
std::string progress_bar_line(const ImportProgress& progress);
// "import: 1200 items (50%), 400 items/s, ETA 3 s, 2 failed"
std::string progress_plain_line(const ImportProgress& progress);

struct ImportSettings {
  std::string path;             // "-": standard input
  size_t concurrency = 16;      // requests in flight at most
  bool create_only = false;     // create (409 for an existing id) instead of upsert
  bool quiet = false;           // no progress output
  uint32_t plain_progress_interval_ms = 5000;  // when stderr is not a terminal
};

// Runs the import of `in` (total_bytes: its size, 0 if unknown) into request.database/container. Progress goes to
// `progress` (a bar when progress_is_terminal), the summary to `out` (JSON or text by `format`), failure examples to
// `progress` too. Returns the exit code: 0 when every line was imported, 1 otherwise.
int run_import(Client& client, const Request& target, const ImportSettings& settings, std::istream& in,
               uint64_t total_bytes, OutputFormat format, std::ostream& out, std::ostream& progress,
               bool progress_is_terminal);

}  // namespace mayfly::client
