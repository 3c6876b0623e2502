// JSON string literals.
//
// JsonString("a\"b") is "\"a\\\"b\"": the text between double quotes with
// '"' and '\\' escaped, newline, carriage return and tab as \n, \r and \t,
// other control characters as \u00XX. Bytes from 0x80 up pass through, so
// UTF-8 input gives UTF-8 JSON. JsonEscape is the same without the quotes,
// for callers that assemble a literal themselves.
#ifndef WEFT_COMMON_JSON_STRING_H_
#define WEFT_COMMON_JSON_STRING_H_

#include <string>

#include "absl/strings/string_view.h"

namespace weft {

std::string JsonString(absl::string_view s);
std::string JsonEscape(absl::string_view s);

}  // namespace weft

#endif  // WEFT_COMMON_JSON_STRING_H_
