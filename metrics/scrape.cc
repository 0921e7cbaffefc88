#include "metrics/scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace mayfly::metrics {

namespace {

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(alphabet[(chunk >> 18) & 63]);
    out.push_back(alphabet[(chunk >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? alphabet[(chunk >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? alphabet[chunk & 63] : '=');
  }
  return out;
}

}  // namespace

std::optional<std::string> http_get(const std::string& host_port, const std::string& path,
                                    const std::string& basic_auth) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::atoi(host_port.c_str() + colon + 1)));
  if (::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &address.sin_addr) != 1) return std::nullopt;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host_port + "\r\n";
    if (!basic_auth.empty()) request += "Authorization: Basic " + base64(basic_auth) + "\r\n";
    request += "\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[16384];
      // Bounded: HTTP/1.0, so the server closes after the body; a stalled server hits the 5 s receive timeout.
      for (ssize_t got; (got = ::read(fd, buffer, sizeof buffer)) > 0 && response.size() < (64u << 20);) {
        response.append(buffer, static_cast<size_t>(got));
      }
    }
  }
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  const size_t line_end = response.find("\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos ||
      response.substr(0, line_end).find(" 200") == std::string::npos) {
    return std::nullopt;
  }
  return response.substr(body + 4);
}

Scrape Scrape::parse(const std::string& text) {
  Scrape scrape;
  scrape.text_ = text;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    Sample sample;
    size_t pos = line.find_first_of("{ ");
    if (pos == std::string::npos) continue;
    sample.name = line.substr(0, pos);
    if (line[pos] == '{') {
      const size_t end = line.find('}', pos);
      if (end == std::string::npos) continue;
      std::istringstream pairs(line.substr(pos + 1, end - pos - 1));
      for (std::string pair; std::getline(pairs, pair, ',');) {
        const size_t eq = pair.find('=');
        if (eq == std::string::npos || pair.size() < eq + 3) continue;
        sample.labels[pair.substr(0, eq)] = pair.substr(eq + 2, pair.size() - eq - 3);  // strip the quotes
      }
      pos = end + 1;
    }
    char* parsed_end = nullptr;
    const char* value = line.c_str() + pos;
    sample.value = std::strtod(value, &parsed_end);
    if (parsed_end == value) continue;
    scrape.samples_.push_back(std::move(sample));
  }
  return scrape;
}

std::optional<Scrape> Scrape::fetch(const std::string& host_port, const std::string& basic_auth) {
  std::optional<std::string> body = http_get(host_port, "/metrics", basic_auth);
  if (!body) return std::nullopt;
  return parse(*body);
}

namespace {
bool matches(const Scrape::Sample& sample, const std::string& name, const std::map<std::string, std::string>& match) {
  if (sample.name != name) return false;
  for (const auto& [key, value] : match) {
    auto it = sample.labels.find(key);
    if (it == sample.labels.end() || it->second != value) return false;
  }
  return true;
}
}  // namespace

double Scrape::sum(const std::string& name, const std::map<std::string, std::string>& match) const {
  double total = 0;
  for (const Sample& sample : samples_) {
    if (matches(sample, name, match)) total += sample.value;
  }
  return total;
}

std::optional<double> Scrape::histogram_quantile(const std::string& name, double q,
                                                 const std::map<std::string, std::string>& match) const {
  std::map<double, double> cumulative;  // upper bound -> count at or below it (+Inf included)
  for (const Sample& sample : samples_) {
    if (!matches(sample, name + "_bucket", match)) continue;
    auto le = sample.labels.find("le");
    if (le == sample.labels.end()) continue;
    const double bound = le->second == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le->second);
    cumulative[bound] += sample.value;
  }
  if (cumulative.empty() || cumulative.rbegin()->second <= 0) return std::nullopt;
  const double rank = std::clamp(q, 0.0, 1.0) * cumulative.rbegin()->second;
  double lower_bound = 0, lower_count = 0;
  for (const auto& [bound, count] : cumulative) {
    if (count >= rank) {
      if (std::isinf(bound)) return lower_bound;
      if (count == lower_count) return bound;
      return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count);
    }
    lower_bound = bound;
    lower_count = count;
  }
  return lower_bound;
}

bool Scrape::has(const std::string& name, const std::map<std::string, std::string>& match) const {
  return std::any_of(samples_.begin(), samples_.end(),
                     [&](const Sample& sample) { return matches(sample, name, match); });
}

}  // namespace mayfly::metrics
