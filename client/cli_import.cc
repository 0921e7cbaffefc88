#include "client/cli_import.h"

#include <boost/json.hpp>
#include <kj/async.h>

#include <chrono>
#include <cstdio>

#include "client/cli_text.h"

namespace mayfly::client {

namespace {

std::string duration_text(double seconds) {
  const auto total = static_cast<long long>(seconds + 0.5);
  char buffer[64];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld:%02lld", total / 3600, total / 60 % 60, total % 60);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld", total / 60, total % 60);
  }
  return buffer;
}

double rate(uint64_t count, double seconds) { return seconds > 0 ? static_cast<double>(count) / seconds : 0; }

std::optional<double> eta_seconds(const ImportProgress& progress) {
  if (progress.total_bytes == 0 || progress.done_bytes == 0 || progress.seconds <= 0) return std::nullopt;
  const double remaining = static_cast<double>(progress.total_bytes - std::min(progress.done_bytes, progress.total_bytes));
  return remaining / rate(progress.done_bytes, progress.seconds);
}

int percent(const ImportProgress& progress) {
  if (progress.total_bytes == 0) return 0;
  return static_cast<int>(100 * std::min(progress.done_bytes, progress.total_bytes) / progress.total_bytes);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"  // kj's ErrorHandler has a non-virtual destructor by design
class IgnoreTaskErrors final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&&) override {}  // every import task catches its own exception
};
#pragma GCC diagnostic pop

std::string validate_line(std::string_view text) {
  boost::system::error_code error;
  const boost::json::value value = boost::json::parse(text, error);
  if (error) return "not JSON (" + error.message() + ")";
  if (!value.is_object()) return "not a JSON object (one item per line)";
  return {};
}

}  // namespace

std::optional<JsonlLine> JsonlReader::next() {
  std::streambuf* buffer = in_.rdbuf();
  while (true) {
    JsonlLine line;
    line.line_number = ++line_number_;
    bool too_long = false;
    bool any = false;
    int c;
    while ((c = buffer->sbumpc()) != std::char_traits<char>::eof()) {
      any = true;
      ++line.bytes;
      if (c == '\n') break;
      if (line.text.size() >= max_line_bytes_) {
        too_long = true;
        line.text.clear();  // keep reading to the newline, holding nothing
        continue;
      }
      if (!too_long) line.text.push_back(static_cast<char>(c));
    }
    if (!any) {
      in_.setstate(std::ios::eofbit);
      return std::nullopt;
    }
    if (!line.text.empty() && line.text.back() == '\r') line.text.pop_back();
    if (line.line_number == 1 && line.text.rfind("\xEF\xBB\xBF", 0) == 0) line.text.erase(0, 3);
    if (too_long) {
      line.error = "longer than " + std::to_string(max_line_bytes_) + " bytes";
      return line;
    }
    if (line.text.find_first_not_of(" \t") == std::string::npos) continue;  // blank
    line.error = validate_line(line.text);
    return line;
  }
}

std::string status_label(const std::string& status) {
  static const std::map<std::string, std::string> names = {
      {"400", "bad request"},      {"401", "unauthorized"}, {"403", "forbidden"},
      {"404", "not found"},        {"408", "timeout"},      {"409", "conflict"},
      {"412", "precondition failed"}, {"413", "too large"},  {"429", "throttled"},
      {"500", "internal error"},   {"503", "unavailable"},
  };
  const auto found = names.find(status);
  return found == names.end() ? status : status + " " + found->second;
}

void ImportTally::succeeded(uint64_t bytes) {
  ++succeeded_;
  done_bytes_ += bytes;
}

void ImportTally::failed(uint64_t line_number, uint64_t bytes, const std::string& status, const std::string& message) {
  ++failed_;
  done_bytes_ += bytes;
  ++by_status_[status];
  if (examples_.size() < kImportFailureExamples) {
    examples_.push_back("line " + std::to_string(line_number) + ": " + status_label(status) + ": " + message);
  }
}

std::string ImportTally::summary_json(double seconds) const {
  std::string out = "{\"imported\":" + std::to_string(succeeded_) + ",\"failed\":" + std::to_string(failed_) +
                    ",\"failuresByStatus\":{";
  bool first = true;
  for (const auto& [status, count] : by_status_) {
    if (!first) out += ",";
    first = false;
    out += json_quote(status) + ":" + std::to_string(count);
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3f", seconds);
  return out + "},\"seconds\":" + buffer + "}";
}

std::string ImportTally::summary_text(double seconds) const {
  char buffer[128];
  std::snprintf(buffer, sizeof(buffer), " in %.1f s (%.0f items/s)", seconds, rate(succeeded_ + failed_, seconds));
  std::string out = "imported " + std::to_string(succeeded_) + " item" + (succeeded_ == 1 ? "" : "s") + buffer;
  if (failed_ == 0) return out + "; none failed\n";
  out += "; " + std::to_string(failed_) + " failed:";
  bool first = true;
  for (const auto& [status, count] : by_status_) {
    out += std::string(first ? " " : ", ") + status_label(status) + " ×" + std::to_string(count);
    first = false;
  }
  return out + "\n";
}

std::string progress_bar_line(const ImportProgress& progress) {
  constexpr int kBarWidth = 24;
  std::string out;
  const double per_second = rate(progress.items, progress.seconds);
  char buffer[160];
  if (progress.total_bytes != 0) {
    const int filled = percent(progress) * kBarWidth / 100;
    out = "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '-') + "] ";
    std::snprintf(buffer, sizeof(buffer), "%3d%%  ", percent(progress));
    out += buffer;
  }
  std::snprintf(buffer, sizeof(buffer), "%llu items  %.0f items/s", static_cast<unsigned long long>(progress.items),
                per_second);
  out += buffer;
  if (const auto eta = eta_seconds(progress); eta.has_value()) out += "  ETA " + duration_text(*eta);
  if (progress.failed != 0) out += "  " + std::to_string(progress.failed) + " failed";
  return out;
}

std::string progress_plain_line(const ImportProgress& progress) {
  char buffer[160];
  std::snprintf(buffer, sizeof(buffer), "import: %llu items", static_cast<unsigned long long>(progress.items));
  std::string out = buffer;
  if (progress.total_bytes != 0) out += " (" + std::to_string(percent(progress)) + "%)";
  std::snprintf(buffer, sizeof(buffer), ", %.0f items/s", rate(progress.items, progress.seconds));
  out += buffer;
  if (const auto eta = eta_seconds(progress); eta.has_value()) {
    out += ", ETA " + std::to_string(static_cast<long long>(*eta + 0.5)) + " s";
  }
  out += ", " + std::to_string(progress.failed) + " failed";
  return out;
}

int run_import(Client& client, const Request& target, const ImportSettings& settings, std::istream& in,
               uint64_t total_bytes, OutputFormat format, std::ostream& out, std::ostream& progress,
               bool progress_is_terminal) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const auto bar_interval = std::chrono::milliseconds(progress_is_terminal ? 100 : settings.plain_progress_interval_ms);
  Clock::time_point last_progress = start;
  bool bar_shown = false;
  ImportTally tally;
  auto snapshot = [&] {
    return ImportProgress{tally.succeeded_count() + tally.failed_count(), tally.failed_count(), tally.done_bytes(),
                          total_bytes, elapsed()};
  };
  auto show_progress = [&](bool final) {
    if (settings.quiet) return;
    const Clock::time_point now = Clock::now();
    if (!final && now - last_progress < bar_interval) return;
    last_progress = now;
    if (progress_is_terminal) {
      progress << "\r\033[K" << progress_bar_line(snapshot()) << (final ? "\n" : "") << std::flush;
      bar_shown = !final;
    } else if (!final) {
      progress << progress_plain_line(snapshot()) << "\n" << std::flush;
    }
  };

  IgnoreTaskErrors error_handler;
  kj::TaskSet tasks(error_handler);
  size_t in_flight = 0;
  kj::Own<kj::PromiseFulfiller<void>> slot_free;
  auto wait_for_slot = [&] {
    auto promise_and_fulfiller = kj::newPromiseAndFulfiller<void>();
    slot_free = kj::mv(promise_and_fulfiller.fulfiller);
    promise_and_fulfiller.promise.wait(client.wait_scope());
    show_progress(false);
  };
  auto finished = [&] {
    --in_flight;
    if (slot_free.get() != nullptr && slot_free->isWaiting()) slot_free->fulfill();
  };

  JsonlReader reader(in);
  while (std::optional<JsonlLine> line = reader.next()) {
    if (!line->error.empty()) {
      tally.failed(line->line_number, line->bytes, "invalid", line->error);
      continue;
    }
    while (in_flight >= settings.concurrency) wait_for_slot();
    Request request = target;
    if (settings.create_only) {
      request.operation = api::CreateItem{.body = std::move(line->text)};
    } else {
      request.operation = api::UpsertItem{.body = std::move(line->text)};
    }
    ++in_flight;
    const uint64_t line_number = line->line_number;
    const uint64_t bytes = line->bytes;
    tasks.add(client.execute_async(request).then(
        [&, line_number, bytes](Response response) {
          if (response.ok()) {
            tally.succeeded(bytes);
          } else {
            tally.failed(line_number, bytes, std::to_string(response.status), response.message);
          }
          finished();
        },
        [&, line_number, bytes](kj::Exception&& exception) {
          tally.failed(line_number, bytes, "client", exception.getDescription().cStr());
          finished();
        }));
  }
  while (in_flight > 0) wait_for_slot();
  if (reader.failed()) tally.failed(0, 0, "read", "reading " + settings.path + " failed before its end");
  if (bar_shown || (progress_is_terminal && !settings.quiet)) show_progress(true);

  const double seconds = elapsed();
  for (const std::string& example : tally.failure_examples()) progress << "mayfly: import: " << example << "\n";
  if (tally.failed_count() > tally.failure_examples().size()) {
    progress << "mayfly: import: ... and " << tally.failed_count() - tally.failure_examples().size() << " more\n";
  }
  out << (format == OutputFormat::kJson ? tally.summary_json(seconds) + "\n" : tally.summary_text(seconds))
      << std::flush;
  return tally.failed_count() == 0 ? 0 : 1;
}

}  // namespace mayfly::client
