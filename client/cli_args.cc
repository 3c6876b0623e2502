#include "client/cli_args.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace weft::client {

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& argv,
                                       const std::vector<FlagSpec>& flags) {
  absl::flat_hash_map<std::string, bool> known;  // name -> takes_value
  for (const FlagSpec& f : flags) known[f.name] = f.takes_value;
  CliArgs args;
  std::vector<std::string> words;
  bool flags_done = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (flags_done || arg == "-" || !absl::StartsWith(arg, "-")) {
      words.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    std::string body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    std::optional<std::string> value;
    const size_t eq = body.find('=');
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    if (body == "h") body = "help";
    auto it = known.find(body);
    if (it == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '", arg, "'"));
    }
    if (it->second) {
      if (!value) {
        if (i + 1 >= argv.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("flag --", body, " needs a value"));
        }
        value = argv[++i];
      }
    } else if (!value) {
      value = "true";
    } else if (*value != "true" && *value != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", body,
                       " is a switch; it takes no value other than "
                       "true or false"));
    }
    if (!args.values_.contains(body)) args.order_.push_back(body);
    args.values_[body] = *value;
  }
  if (!words.empty()) {
    args.command_ = words.front();
    args.positional_.assign(words.begin() + 1, words.end());
  }
  return args;
}

bool CliArgs::Bool(const std::string& flag) const {
  auto it = values_.find(flag);
  return it != values_.end() && it->second == "true";
}

std::optional<std::string> CliArgs::String(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::optional<int>> CliArgs::Int(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::optional<int>();
  int value;
  if (!absl::SimpleAtoi(it->second, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", it->second, "' is not an integer"));
  }
  return std::optional<int>(value);
}

absl::StatusOr<std::optional<double>> CliArgs::Double(
    const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::optional<double>();
  double value;
  if (!absl::SimpleAtod(it->second, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", it->second, "' is not a number"));
  }
  return std::optional<double>(value);
}

absl::StatusOr<std::optional<absl::Duration>> CliArgs::Duration(
    const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::optional<absl::Duration>();
  absl::Duration d;
  if (!absl::ParseDuration(it->second, &d) || d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", it->second,
                     "' is not a positive duration (e.g. 30s, 500ms, 2m)"));
  }
  return std::optional<absl::Duration>(d);
}

absl::Status CliArgs::CheckAllowed(
    const absl::flat_hash_set<std::string>& allowed,
    const std::string& command) const {
  for (const std::string& flag : order_) {
    if (!allowed.contains(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", flag, " does not apply to '", command, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::client
