#include "storage/feed_range.h"

#include <cstdint>
#include <cstring>

#include "storage/json.h"

namespace mayfly::storage {
namespace {

// The component type bytes of Cosmos's partition key encoding.
constexpr uint8_t kUndefined = 0x00;  // an item without a value at the path: "{}" in canonical form
constexpr uint8_t kNull = 0x01;
constexpr uint8_t kFalse = 0x02;
constexpr uint8_t kTrue = 0x03;
constexpr uint8_t kNumber = 0x05;
constexpr uint8_t kString = 0x08;
constexpr size_t kMaxEpkChars = 256;

uint64_t rotl(uint64_t value, int shift) { return (value << shift) | (value >> (64 - shift)); }

uint64_t fmix(uint64_t value) {
  value ^= value >> 33;
  value *= 0xff51afd7ed558ccdULL;
  value ^= value >> 33;
  value *= 0xc4ceb9fe1a85ec53ULL;
  value ^= value >> 33;
  return value;
}

uint64_t load_le(const uint8_t* bytes, size_t count) {
  uint64_t value = 0;
  for (size_t i = 0; i < count; ++i) value |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return value;
}

// MurmurHash3 x64 128, seed 0: {h1, h2}.
void murmur3_128(const std::string& data, uint64_t& h1, uint64_t& h2) {
  constexpr uint64_t c1 = 0x87c37b91114253d5ULL;
  constexpr uint64_t c2 = 0x4cf5ad432745937fULL;
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  const size_t length = data.size();
  h1 = 0;
  h2 = 0;
  size_t position = 0;
  for (; position + 16 <= length; position += 16) {
    uint64_t k1 = load_le(bytes + position, 8);
    uint64_t k2 = load_le(bytes + position + 8, 8);
    k1 *= c1;
    k1 = rotl(k1, 31);
    k1 *= c2;
    h1 ^= k1;
    h1 = rotl(h1, 27);
    h1 += h2;
    h1 = h1 * 5 + 0x52dce729;
    k2 *= c2;
    k2 = rotl(k2, 33);
    k2 *= c1;
    h2 ^= k2;
    h2 = rotl(h2, 31);
    h2 += h1;
    h2 = h2 * 5 + 0x38495ab5;
  }
  const size_t tail = length - position;
  uint64_t k1 = load_le(bytes + position, tail < 8 ? tail : 8);
  uint64_t k2 = tail > 8 ? load_le(bytes + position + 8, tail - 8) : 0;
  k2 *= c2;
  k2 = rotl(k2, 33);
  k2 *= c1;
  h2 ^= k2;
  k1 *= c1;
  k1 = rotl(k1, 31);
  k1 *= c2;
  h1 ^= k1;
  h1 ^= length;
  h2 ^= length;
  h1 += h2;
  h2 += h1;
  h1 = fmix(h1);
  h2 = fmix(h2);
  h1 += h2;
  h2 += h1;
}

bool is_hex(std::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'f') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

// The 32 hex digits of one component's hash.
Result<std::string> component_epk(const boost::json::value& value) {
  std::string bytes;
  auto number = [&](double d) {
    bytes.push_back(static_cast<char>(kNumber));
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  };
  switch (value.kind()) {
    case boost::json::kind::null: bytes.push_back(static_cast<char>(kNull)); break;
    case boost::json::kind::bool_: bytes.push_back(static_cast<char>(value.get_bool() ? kTrue : kFalse)); break;
    case boost::json::kind::int64: number(static_cast<double>(value.get_int64())); break;
    case boost::json::kind::uint64: number(static_cast<double>(value.get_uint64())); break;
    case boost::json::kind::double_: number(value.get_double()); break;
    case boost::json::kind::string:
      bytes.push_back(static_cast<char>(kString));
      bytes.append(value.get_string().data(), value.get_string().size());
      bytes.push_back(static_cast<char>(0xff));
      break;
    case boost::json::kind::object:
      if (value.get_object().empty()) {
        bytes.push_back(static_cast<char>(kUndefined));
        break;
      }
      return Status::invalid_argument("a partition key value is a string, number, boolean or null");
    case boost::json::kind::array:
      return Status::invalid_argument("a partition key value is a string, number, boolean or null");
  }
  uint64_t h1 = 0;
  uint64_t h2 = 0;
  murmur3_128(bytes, h1, h2);
  uint8_t hash[16];
  for (int i = 0; i < 8; ++i) {
    hash[i] = static_cast<uint8_t>(h2 >> (56 - 8 * i));
    hash[8 + i] = static_cast<uint8_t>(h1 >> (56 - 8 * i));
  }
  hash[0] &= 0x3f;  // below "FF", the maximum exclusive EPK
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(32);
  for (uint8_t byte : hash) {
    out.push_back(kDigits[byte >> 4]);
    out.push_back(kDigits[byte & 0xf]);
  }
  return out;
}

}  // namespace

Result<std::string> effective_partition_key(std::string_view canonical_partition_key_json) {
  Result<boost::json::value> parsed = json::parse(canonical_partition_key_json);
  if (!parsed.is_ok()) return Status::invalid_argument("partition key value is not JSON: " + parsed.status().message());
  if (!parsed->is_array()) return component_epk(*parsed);
  // A hierarchical key (MultiHash): each component hashed on its own, the hashes one after the other, so a key's
  // prefix of components names the range [EPK(prefix), EPK(prefix) + "FF").
  const boost::json::array& components = parsed->get_array();
  if (components.empty() || components.size() > json::kMaxPartitionKeyPaths) {
    return Status::invalid_argument("a hierarchical partition key value has 1 to 3 components");
  }
  std::string out;
  for (const boost::json::value& component : components) {
    Result<std::string> hashed = component_epk(component);
    if (!hashed.is_ok()) return hashed.status();
    out += hashed.value();
  }
  return out;
}

FeedRange point_feed_range(const std::string& epk) {
  std::string max = epk;
  size_t i = max.size();
  while (i > 0) {
    --i;
    if (max[i] == 'F') {
      max[i] = '0';
      continue;
    }
    max[i] = max[i] == '9' ? 'A' : static_cast<char>(max[i] + 1);
    return FeedRange{epk, max};
  }
  return FeedRange{epk, "FF"};  // all F (not an EPK the hash makes): up to the end
}

Result<FeedRange> parse_feed_range(std::string_view start_epk, std::string_view end_epk) {
  FeedRange range;
  for (auto [name, text] : {std::pair{"x-ms-start-epk", start_epk}, std::pair{"x-ms-end-epk", end_epk}}) {
    if (text.size() > kMaxEpkChars || !is_hex(text)) {
      return Status::invalid_argument(std::string(name) +
                                      " must be an effective partition key in hex (a feed range's bound), not '" +
                                      std::string(text.substr(0, 80)) + "'");
    }
  }
  range.min = upper(start_epk);
  if (!end_epk.empty()) range.max = upper(end_epk);
  if (!(range.min < range.max)) {
    return Status::invalid_argument("the feed range is empty: x-ms-start-epk '" + range.min +
                                    "' is not below x-ms-end-epk '" + range.max + "'");
  }
  return range;
}

}  // namespace mayfly::storage
