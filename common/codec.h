// Binary encoding helpers shared by the persisted formats (LevelDB keys and values, log commands).
//
// - Fixed-width integers are big-endian, so encoded keys sort like the numbers (signed values are stored with the
//   sign bit flipped for the same reason).
// - Varints are LEB128 (7 bits a byte, little end first).
// - `put_ordered_string` escapes 0x00 as 00 FF and ends the string with 00 01, so concatenated components sort
//   component by component, whatever bytes they hold.
//
// Decoding never trusts its input: every getter returns false on a short or malformed buffer, and the reader stays
// failed. Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mayfly::codec {

void put_u8(std::string& out, uint8_t value);
void put_u64_be(std::string& out, uint64_t value);
void put_i64_be(std::string& out, int64_t value);  // order-preserving for negative values too
void put_varint(std::string& out, uint64_t value);
void put_varint_signed(std::string& out, int64_t value);  // zigzag
void put_bytes(std::string& out, std::string_view bytes);  // varint length + bytes
void put_ordered_string(std::string& out, std::string_view bytes);

// Reads values back from a buffer, front to back. Once a read fails, ok() is false and every later read fails.
class Reader {
 public:
  explicit Reader(std::string_view buffer) : rest_(buffer) {}

  bool get_u8(uint8_t& value);
  bool get_u64_be(uint64_t& value);
  bool get_i64_be(int64_t& value);
  bool get_varint(uint64_t& value);
  bool get_varint_signed(int64_t& value);
  bool get_bytes(std::string_view& bytes);  // a view into the buffer
  bool get_ordered_string(std::string& value);
  bool get_bool(bool& value);

  bool ok() const { return ok_; }
  bool done() const { return ok_ && rest_.empty(); }
  std::string_view rest() const { return rest_; }

 private:
  bool fail() {
    ok_ = false;
    return false;
  }
  std::string_view rest_;
  bool ok_ = true;
};

// The smallest string greater than every string that starts with `prefix` ("" if there is none).
std::string prefix_successor(std::string_view prefix);

// Lowercase hex of arbitrary bytes, and back (nullopt for odd lengths or other characters): opaque tokens such as
// continuations, safe in JSON and on a command line.
std::string hex_encode(std::string_view bytes);
std::optional<std::string> hex_decode(std::string_view text);

}  // namespace mayfly::codec
