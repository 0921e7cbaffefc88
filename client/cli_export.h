// `mayfly item export DB CONTAINER [--out FILE]`: every item of the container (all partitions), one JSON object per
// line (JSONL), read a page at a time (memory bounded by one page) with the system properties kept (the server
// ignores _rid, _etag and _ts on a write, so `item import` takes the file as it is) or stripped (--strip-system).
// With --out the file is written as FILE.partial and renamed when the export is complete.
// Thread-safety: one thread (the Client's).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "client/client.h"

namespace mayfly::client {

struct ExportSettings {
  std::string out_path;       // empty or "-": standard output
  bool strip_system = false;  // drop _rid, _self, _etag, _attachments and _ts
  uint32_t page_items = 1000;
  bool quiet = false;         // no "exported N items" line
};

// One item as its JSONL line (no newline): compact, every number as the server wrote it, minus the system
// properties when strip_system.
std::string export_line(std::string_view item, bool strip_system);

// Writes every item of target.database/container to `out`, one per line. Returns the number of items and sets
// `error` (non-empty) when a page failed (the output then holds the items before it).
uint64_t export_items(Client& client, const Request& target, const ExportSettings& settings, std::ostream& out,
                      std::string& error);

// The command: export to settings.out_path (or `standard_output`), then a line on `messages`. Returns the exit code.
int run_export(Client& client, const Request& target, const ExportSettings& settings, std::ostream& standard_output,
               std::ostream& messages);

}  // namespace mayfly::client
