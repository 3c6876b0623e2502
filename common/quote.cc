#include "common/quote.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft {

std::string Quote(absl::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  const absl::string_view kept = cut ? text.substr(0, max_bytes) : text;
  std::string out = "'";
  out.reserve(kept.size() + 32);
  for (const char c : kept) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\'' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20 || u >= 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", u));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  if (cut) absl::StrAppend(&out, "... (", text.size(), " bytes)");
  return out;
}

}  // namespace weft
