#include "client/graph_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace weft::client {
namespace {

// Collects the text-format parser's complaints as "name:line:col: message".
class TextErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit TextErrors(absl::string_view name) : name_(name) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors_.push_back(
        absl::StrCat(name_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber,
                  const std::string&) override {}
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  const std::string name_;
  std::vector<std::string> errors_;
};

// A strict JSON syntax check (RFC 8259) that reports where the first error
// is; protobuf's parser says what is wrong but not on which line.
class JsonSyntax {
 public:
  explicit JsonSyntax(absl::string_view text) : text_(text) {}

  // Empty when the text is well-formed JSON, else "line:col: why".
  std::string FirstError() {
    SkipSpace();
    if (!Value()) return error_;
    SkipSpace();
    if (pos_ != text_.size()) Fail("unexpected text after the JSON value");
    return error_;
  }

 private:
  bool Fail(absl::string_view why) {
    if (!error_.empty()) return false;
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    error_ = absl::StrCat(line, ":", col, ": ", why);
    return false;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' ||
                        Peek() == '\r')) {
      ++pos_;
    }
  }
  bool Literal(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) {
      return Fail(
          "invalid value (expected a string, number, object, array, "
          "true, false or null)");
    }
    pos_ += word.size();
    return true;
  }
  bool Value() {
    if (++depth_ > 1000) return Fail("nested too deeply");
    bool ok;
    switch (Peek()) {
      case '{':
        ok = Object();
        break;
      case '[':
        ok = Array();
        break;
      case '"':
        ok = String();
        break;
      case 't':
        ok = Literal("true");
        break;
      case 'f':
        ok = Literal("false");
        break;
      case 'n':
        ok = Literal("null");
        break;
      case '\0':
        ok = AtEnd() ? Fail("unexpected end of file") : Number();
        break;
      default:
        ok = Number();
    }
    --depth_;
    return ok;
  }
  bool Object() {
    ++pos_;  // '{'
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (Peek() != '"') return Fail("expected a quoted field name");
      if (!String()) return false;
      SkipSpace();
      if (Peek() != ':') return Fail("expected ':' after the field name");
      ++pos_;
      SkipSpace();
      if (!Value()) return false;
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        SkipSpace();
        if (Peek() == '}') return Fail("trailing ',' before '}'");
        continue;
      }
      if (Peek() == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or '}' after a field");
    }
  }
  bool Array() {
    ++pos_;  // '['
    SkipSpace();
    if (Peek() == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (!Value()) return false;
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        SkipSpace();
        if (Peek() == ']') return Fail("trailing ',' before ']'");
        continue;
      }
      if (Peek() == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or ']' after an array element");
    }
  }
  bool String() {
    ++pos_;  // '"'
    while (!AtEnd()) {
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Fail("control character inside a string");
      }
      if (c == '\\') {
        ++pos_;
        if (AtEnd()) break;
        const char e = text_[pos_];
        if (e == 'u') {
          for (int i = 1; i <= 4; ++i) {
            if (pos_ + i >= text_.size() ||
                !absl::ascii_isxdigit(text_[pos_ + i])) {
              return Fail("bad \\u escape");
            }
          }
          pos_ += 4;
        } else if (!absl::StrContains("\"\\/bfnrt", e)) {
          return Fail("bad escape in a string");
        }
      }
      ++pos_;
    }
    return Fail("unterminated string");
  }
  bool Number() {
    const size_t start = pos_;
    if (Peek() == '-') ++pos_;
    if (!absl::ascii_isdigit(Peek())) {
      pos_ = start;
      return Fail(
          "invalid value (expected a string, number, object, array, true, "
          "false or null)");
    }
    if (Peek() == '0') {
      ++pos_;
    } else {
      while (absl::ascii_isdigit(Peek())) ++pos_;
    }
    if (Peek() == '.') {
      ++pos_;
      if (!absl::ascii_isdigit(Peek()))
        return Fail("digits expected after '.'");
      while (absl::ascii_isdigit(Peek())) ++pos_;
    }
    if (Peek() == 'e' || Peek() == 'E') {
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (!absl::ascii_isdigit(Peek()))
        return Fail("digits expected in exponent");
      while (absl::ascii_isdigit(Peek())) ++pos_;
    }
    return true;
  }

  absl::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

}  // namespace

absl::StatusOr<GraphFormat> GraphFormatForPath(absl::string_view path) {
  const std::string lower = absl::AsciiStrToLower(path);
  if (absl::EndsWith(lower, ".json")) return GraphFormat::kJson;
  for (absl::string_view ext : {".textproto", ".txtpb", ".pbtxt"}) {
    if (absl::EndsWith(lower, ext)) return GraphFormat::kText;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path,
                   ": unknown graph file type; use .json (proto3 JSON) or "
                   ".textproto, .txtpb, .pbtxt (protobuf text format)"));
}

absl::StatusOr<weft::v1::Graph> ParseGraph(absl::string_view contents,
                                           GraphFormat format,
                                           absl::string_view name) {
  weft::v1::Graph graph;
  if (format == GraphFormat::kText) {
    TextErrors errors(name);
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    google::protobuf::io::ArrayInputStream input(
        contents.data(), static_cast<int>(contents.size()));
    if (!parser.Parse(&input, &graph)) {
      if (errors.errors().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": not a valid weft.v1.Graph in text format"));
      }
      return absl::InvalidArgumentError(absl::StrJoin(errors.errors(), "\n"));
    }
    return graph;
  }
  const std::string syntax = JsonSyntax(contents).FirstError();
  if (!syntax.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ":", syntax, " (invalid JSON)"));
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto s = google::protobuf::util::JsonStringToMessage(
      std::string(contents), &graph, options);
  if (!s.ok()) {
    // The parser reports "(path): why" or "path: why"; keep the path.
    std::string message(s.message());
    if (absl::StartsWith(message, "(")) {
      const size_t close = message.find("):");
      if (close != std::string::npos) {
        message = absl::StrCat(message.substr(1, close - 1),
                               message.substr(close + 1));
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", message));
  }
  return graph;
}

absl::StatusOr<weft::v1::Graph> LoadGraphFile(const std::string& path) {
  absl::StatusOr<GraphFormat> format = GraphFormatForPath(path);
  if (!format.ok()) return format.status();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("error reading ", path));
  }
  absl::StatusOr<weft::v1::Graph> graph =
      ParseGraph(contents.str(), *format, path);
  if (!graph.ok()) return graph;
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  absl::Status inlined = InlineModuleFiles(*graph, dir, path);
  if (!inlined.ok()) return inlined;
  return graph;
}

absl::Status InlineModuleFiles(weft::v1::Graph& graph,
                               absl::string_view base_dir,
                               absl::string_view name) {
  for (int i = 0; i < graph.modules_size(); ++i) {
    weft::v1::Module* module = graph.mutable_modules(i);
    const bool is_source = module->code_case() == weft::v1::Module::kSourceFile;
    if (!is_source && module->code_case() != weft::v1::Module::kPtxFile) {
      continue;
    }
    const std::string file =
        is_source ? module->source_file() : module->ptx_file();
    const std::string field = absl::StrCat(
        "modules[", i, "].", is_source ? "source_file" : "ptx_file");
    if (file.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": ", field, ": empty path"));
    }
    const std::string resolved =
        absl::StartsWith(file, "/") ? file : absl::StrCat(base_dir, "/", file);
    std::ifstream in(resolved, std::ios::binary);
    if (!in) {
      return absl::NotFoundError(absl::StrCat(name, ": ", field,
                                              ": cannot read ", resolved, ": ",
                                              std::strerror(errno)));
    }
    std::ostringstream code;
    code << in.rdbuf();
    if (in.bad()) {
      return absl::DataLossError(
          absl::StrCat(name, ": ", field, ": error reading ", resolved));
    }
    if (is_source) {
      module->set_cuda_source(code.str());
    } else {
      module->set_ptx(code.str());
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::client
