#include "client/cli_export.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "client/cli_text.h"

namespace mayfly::client {

namespace {

}  // namespace

std::string export_line(std::string_view item, bool strip_system) {
  if (!strip_system) return compact_json(item);
  std::string out = "{";
  for (const auto& [key, value] : json_object_members(item)) {
    if (is_system_property(key)) continue;
    if (out.size() > 1) out += ",";
    out += json_quote(key) + ":" + compact_json(value);
  }
  return out + "}";
}

uint64_t export_items(Client& client, const Request& target, const ExportSettings& settings, std::ostream& out,
                      std::string& error) {
  Request request = target;
  request.operation = api::ListItems{};  // every partition
  request.options.max_items = settings.page_items;
  PageIterator pages(client, request);
  uint64_t count = 0;
  while (pages.has_more()) {
    const Response page = pages.next();
    if (!page.ok()) {
      error = "listing items failed after " + std::to_string(count) + " items: " + std::to_string(page.status) +
              " (substatus " + std::to_string(page.substatus) + "): " + page.message;
      return count;
    }
    if (!is_valid_json(page.body) || page.body.empty() || page.body.front() != '[') {
      error = "a page of items is not a JSON array";
      return count;
    }
    for (std::string_view item : json_array_elements(page.body)) {
      out << export_line(item, settings.strip_system) << '\n';
      ++count;
    }
    if (!out) {
      error = "writing the output failed after " + std::to_string(count) + " items";
      return count;
    }
  }
  return count;
}

int run_export(Client& client, const Request& target, const ExportSettings& settings, std::ostream& standard_output,
               std::ostream& messages) {
  std::string error;
  uint64_t count = 0;
  const bool to_file = !settings.out_path.empty() && settings.out_path != "-";
  if (to_file) {
    const std::string partial = settings.out_path + ".partial";
    {
      std::ofstream file(partial, std::ios::binary | std::ios::trunc);
      if (!file) {
        messages << "mayfly: export: cannot write '" << partial << "'\n";
        return 1;
      }
      count = export_items(client, target, settings, file, error);
      file.flush();
      if (error.empty() && !file) error = "writing '" + partial + "' failed";
    }
    if (error.empty()) {
      std::error_code rename_error;
      std::filesystem::rename(partial, settings.out_path, rename_error);
      if (rename_error) error = "renaming '" + partial + "': " + rename_error.message();
    }
    if (!error.empty()) {
      messages << "mayfly: export: " << error << " (the items so far are in '" << partial << "')\n";
      return 1;
    }
  } else {
    count = export_items(client, target, settings, standard_output, error);
    standard_output.flush();
    if (!error.empty()) {
      messages << "mayfly: export: " << error << "\n";
      return 1;
    }
  }
  if (!settings.quiet) {
    messages << "exported " << count << " item" << (count == 1 ? "" : "s") << " from " << target.database << "/"
             << target.container << (to_file ? " to " + settings.out_path : std::string()) << "\n";
  }
  return 0;
}

}  // namespace mayfly::client
