// UTF-8 decoding and encoding for the characters vocabulary and the tokenizers. Decoding is strict (no
// overlong forms, surrogates or code points past U+10FFFF), so a file in another encoding
// is an error naming the byte, not a vocabulary of mojibake.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace distrain {

// The code points of `text`; invalid UTF-8 is a UserError "<source>: invalid UTF-8 at byte
// offset N ...", followed by `hint` when given.
std::vector<char32_t> decode_utf8(std::string_view text, const std::string& source, const std::string& hint = "");
// The same check without keeping the code points.
void check_utf8(std::string_view text, const std::string& source);
void append_utf8(std::string& out, char32_t code_point);
// For messages: 'a' (U+0061), or U+000A alone for a character that does not print.
std::string describe_code_point(char32_t code_point);

}  // namespace distrain
