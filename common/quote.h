// Quote: client input as it may appear in an error message.
//
// Error messages name what a client sent (an unknown buffer, a job id) so
// that the client can find it, but must stay small and printable whatever
// was sent: Quote wraps the text in single quotes, escapes bytes that are
// not printable ASCII as \xNN (and ' and \ as \' and \\), and keeps at most
// `max_bytes` of the input, saying how long the whole was:
//   Quote("x")             -> 'x'
//   Quote("a\nb")          -> 'a\x0ab'
//   Quote(<4 MiB of 'a'>)  -> 'aaa<64 bytes in all>'... (4194304 bytes)
#ifndef WEFT_COMMON_QUOTE_H_
#define WEFT_COMMON_QUOTE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace weft {

inline constexpr size_t kQuoteMaxBytes = 64;

std::string Quote(absl::string_view text, size_t max_bytes = kQuoteMaxBytes);

}  // namespace weft

#endif  // WEFT_COMMON_QUOTE_H_
