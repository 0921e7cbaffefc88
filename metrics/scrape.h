// Reading metrics back: one scrape of a node's Prometheus text endpoint (/metrics) over plain HTTP/1.0, and lookups
// in it. For tests and benchmarks, which only read our own nodes' output: label values never contain quotes, commas
// or braces.
//
// Thread-safety: a value; http_get blocks the calling thread (connect, send and receive time out after 5 s).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mayfly::metrics {

// GET http://<host:port><path>; the body of a 200 answer, or nullopt (no answer, not 200, timeout).
// `basic_auth` "USER:PASSWORD" is sent as HTTP basic authentication; empty: none.
std::optional<std::string> http_get(const std::string& host_port, const std::string& path,
                                    const std::string& basic_auth = std::string());

class Scrape {
 public:
  struct Sample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
  };

  static Scrape parse(const std::string& text);
  // Scrapes http://<host_port>/metrics; nullopt if the node did not answer.
  static std::optional<Scrape> fetch(const std::string& host_port, const std::string& basic_auth = std::string());

  // The sum of the samples named `name` whose labels include every pair of `match` (0 when none).
  double sum(const std::string& name, const std::map<std::string, std::string>& match = {}) const;
  bool has(const std::string& name, const std::map<std::string, std::string>& match = {}) const;
  // The q-quantile (0..1) of histogram `name` (its `name`_bucket series matching `match`, summed per bound), by
  // linear interpolation inside the bucket as Prometheus's histogram_quantile does; nullopt when it counted nothing.
  // Above the last finite bound it answers that bound.
  std::optional<double> histogram_quantile(const std::string& name, double q,
                                           const std::map<std::string, std::string>& match = {}) const;
  const std::string& text() const { return text_; }  // as scraped, for failure messages

 private:
  std::vector<Sample> samples_;
  std::string text_;
};

}  // namespace mayfly::metrics
