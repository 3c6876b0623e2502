// Early-return helpers for absl::Status and absl::StatusOr.
//
// Abseil 20220623 (Debian 12) has no ABSL_RETURN_IF_ERROR, so Weft carries
// this one small pair. Usable from every layer above proto/.
#ifndef WEFT_SCHEDULER_STATUS_MACROS_H_
#define WEFT_SCHEDULER_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function when it is not OK.
#define WEFT_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status weft_status_ = (expr);        \
    if (!weft_status_.ok()) return weft_status_; \
  } while (false)

#define WEFT_STATUS_CONCAT_INNER_(a, b) a##b
#define WEFT_STATUS_CONCAT_(a, b) WEFT_STATUS_CONCAT_INNER_(a, b)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status,
// otherwise moves the value into `lhs` (a declaration or an lvalue).
#define WEFT_ASSIGN_OR_RETURN(lhs, rexpr)                                    \
  WEFT_ASSIGN_OR_RETURN_IMPL_(WEFT_STATUS_CONCAT_(weft_statusor_, __LINE__), \
                              lhs, rexpr)

#define WEFT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)  \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // WEFT_SCHEDULER_STATUS_MACROS_H_
