// GPT-2's byte-to-character table: each byte stands for a printable code point,
// so that byte-level BPE vocabularies are text. Used by the ByteLevel
// pre-tokenizer and decoder.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pipetrain::data::hf {

/// Each byte of `bytes` as its character (UTF-8).
std::string bytes_to_chars(std::string_view bytes);
/// The byte a character stands for, if it is one of the table's 256.
std::optional<unsigned char> char_to_byte(char32_t c);

}  // namespace pipetrain::data::hf
