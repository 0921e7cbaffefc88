#include "common/codec.h"

namespace mayfly::codec {

void put_u8(std::string& out, uint8_t value) { out.push_back(static_cast<char>(value)); }

void put_u64_be(std::string& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xff));
}

void put_i64_be(std::string& out, int64_t value) {
  put_u64_be(out, static_cast<uint64_t>(value) ^ (uint64_t{1} << 63));
}

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_varint_signed(std::string& out, int64_t value) {
  put_varint(out, (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63));
}

void put_bytes(std::string& out, std::string_view bytes) {
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_ordered_string(std::string& out, std::string_view bytes) {
  for (char c : bytes) {
    out.push_back(c);
    if (c == '\0') out.push_back(static_cast<char>(0xff));
  }
  out.push_back('\0');
  out.push_back('\x01');
}

bool Reader::get_u8(uint8_t& value) {
  if (!ok_ || rest_.empty()) return fail();
  value = static_cast<uint8_t>(rest_[0]);
  rest_.remove_prefix(1);
  return true;
}

bool Reader::get_u64_be(uint64_t& value) {
  if (!ok_ || rest_.size() < 8) return fail();
  value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | static_cast<uint8_t>(rest_[i]);
  rest_.remove_prefix(8);
  return true;
}

bool Reader::get_i64_be(int64_t& value) {
  uint64_t raw;
  if (!get_u64_be(raw)) return false;
  value = static_cast<int64_t>(raw ^ (uint64_t{1} << 63));
  return true;
}

bool Reader::get_varint(uint64_t& value) {
  if (!ok_) return false;
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (rest_.empty()) return fail();
    const uint8_t byte = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    if (shift == 63 && byte > 1) return fail();  // would overflow 64 bits
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return fail();
}

bool Reader::get_varint_signed(int64_t& value) {
  uint64_t raw;
  if (!get_varint(raw)) return false;
  value = static_cast<int64_t>((raw >> 1) ^ (~(raw & 1) + 1));
  return true;
}

bool Reader::get_bytes(std::string_view& bytes) {
  uint64_t size;
  if (!get_varint(size)) return false;
  if (size > rest_.size()) return fail();
  bytes = rest_.substr(0, size);
  rest_.remove_prefix(size);
  return true;
}

bool Reader::get_ordered_string(std::string& value) {
  if (!ok_) return false;
  value.clear();
  size_t i = 0;
  while (i < rest_.size()) {
    const char c = rest_[i];
    if (c != '\0') {
      value.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= rest_.size()) return fail();
    const uint8_t next = static_cast<uint8_t>(rest_[i + 1]);
    if (next == 0xff) {
      value.push_back('\0');
      i += 2;
    } else if (next == 0x01) {
      rest_.remove_prefix(i + 2);
      return true;
    } else {
      return fail();
    }
  }
  return fail();
}

bool Reader::get_bool(bool& value) {
  uint8_t byte;
  if (!get_u8(byte)) return false;
  if (byte > 1) return fail();
  value = byte == 1;
  return true;
}

std::string prefix_successor(std::string_view prefix) {
  std::string out(prefix);
  while (!out.empty()) {
    const uint8_t last = static_cast<uint8_t>(out.back());
    if (last != 0xff) {
      out.back() = static_cast<char>(last + 1);
      return out;
    }
    out.pop_back();
  }
  return out;
}

std::string hex_encode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    out.push_back(kHex[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kHex[static_cast<uint8_t>(c) & 0xf]);
  }
  return out;
}

std::optional<std::string> hex_decode(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 2);
  for (size_t i = 0; i < text.size(); i += 2) {
    const int high = nibble(text[i]), low = nibble(text[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out.push_back(static_cast<char>(high * 16 + low));
  }
  return out;
}

}  // namespace mayfly::codec
