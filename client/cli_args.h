// Command-line parsing for weftctl: a command, positional arguments and
// --flags that may appear anywhere on the line ("--name=value", or
// "--name value" for flags that take a value; "--" ends the flags).
#ifndef WEFT_CLIENT_CLI_ARGS_H_
#define WEFT_CLIENT_CLI_ARGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace weft::client {

struct FlagSpec {
  std::string name;
  bool takes_value = true;  // false: a boolean switch
};

// Not thread-safe (a value type).
class CliArgs {
 public:
  // Parses argv[1..] (argv[0] is the program). `flags` lists every flag
  // known to any command. INVALID_ARGUMENT for unknown flags, missing
  // values or values given to switches other than true/false.
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& argv,
                                       const std::vector<FlagSpec>& flags);

  // The first positional argument ("" when none) and the rest.
  const std::string& command() const { return command_; }
  const std::vector<std::string>& positional() const { return positional_; }

  bool Has(const std::string& flag) const { return values_.contains(flag); }
  // A switch: true when given without a value or with "true".
  bool Bool(const std::string& flag) const;
  std::optional<std::string> String(const std::string& flag) const;
  // INVALID_ARGUMENT naming the flag when the value is not an integer.
  absl::StatusOr<std::optional<int>> Int(const std::string& flag) const;
  // INVALID_ARGUMENT naming the flag when the value is not a finite number.
  absl::StatusOr<std::optional<double>> Double(const std::string& flag) const;
  absl::StatusOr<std::optional<absl::Duration>> Duration(
      const std::string& flag) const;

  // INVALID_ARGUMENT naming the first flag given that is not in `allowed`.
  absl::Status CheckAllowed(const absl::flat_hash_set<std::string>& allowed,
                            const std::string& command) const;

 private:
  std::string command_;
  std::vector<std::string> positional_;
  absl::flat_hash_map<std::string, std::string> values_;
  std::vector<std::string> order_;  // flags in the order given
};

}  // namespace weft::client

#endif  // WEFT_CLIENT_CLI_ARGS_H_
