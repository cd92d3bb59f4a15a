// The `.synk` lexer (see lexer.h). Every malformed piece of text gets exactly one message that
// names it: an unexpected character, an unterminated string or comment, an integer above 2^63-1,
// a float out of range, a number glued to letters (`10n`).
#include "dsl/lexer.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

namespace synk::dsl {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

struct Keyword {
  std::string_view word;
  TokenKind kind;
};
constexpr Keyword kKeywords[] = {
    {"fn", TokenKind::KwFn},           {"shared", TokenKind::KwShared},
    {"let", TokenKind::KwLet},         {"out", TokenKind::KwOut},
    {"update", TokenKind::KwUpdate},   {"scatter", TokenKind::KwScatter},
    {"bcast", TokenKind::KwBcast},     {"minibatch", TokenKind::KwMinibatch},
    {"sliceable", TokenKind::KwSliceable}, {"true", TokenKind::KwTrue},
    {"false", TokenKind::KwFalse},
    {"optimizer", TokenKind::KwOptimizer}, {"minimize", TokenKind::KwMinimize},
    {"def", TokenKind::KwDef},         {"return", TokenKind::KwReturn},
};

// The length of the valid UTF-8 sequence starting at text[0], or 0 when it is not one.
size_t utf8_sequence_length(std::string_view text) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(0);
  size_t length = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 && lead < 0xE0 ? 2 : 0;
  if (lead >= 0xF5 || length == 0 || length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
  }
  return length;
}

// A user-facing rendering of a short spelling: long ones are cut so messages stay one line.
std::string shorten(std::string_view spelling) {
  constexpr size_t kMax = 32;
  if (spelling.size() <= kMax) return std::string(spelling);
  return std::string(spelling.substr(0, kMax)) + "...";
}

}  // namespace

Lexer::Lexer(const SourceFile& file, DiagnosticEngine& diags)
    : file_(file), diags_(diags), text_(file.text()) {}

bool Lexer::can_start_token(size_t at) const {
  char c = text_[at];
  if (is_space(c) || is_ident_char(c) || c == '"' || c == '.') return true;
  if (c == '&' || c == '|') return at + 1 < text_.size() && text_[at + 1] == c;
  return std::string_view("()[]{},;:+-/@*=!<>").find(c) != std::string_view::npos;
}

char Lexer::peek(size_t ahead) const {
  return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
}

Token Lexer::make(TokenKind kind, size_t begin) {
  Token token;
  token.kind = kind;
  token.spelling = text_.substr(begin, pos_ - begin);
  token.loc = file_.loc_at(begin);
  return token;
}

Token Lexer::error_token(size_t begin, std::string message) {
  diags_.error(file_.loc_at(begin), std::move(message));
  return make(TokenKind::Error, begin);
}

void Lexer::skip_whitespace_and_comments() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (is_space(c)) {
      ++pos_;
    } else if (c == '/' && peek(1) == '/') {
      while (pos_ < text_.size() && text_[pos_] != '\n' && text_[pos_] != '\r') ++pos_;   // '\r': old Mac files
    } else if (c == '/' && peek(1) == '*') {
      size_t close = text_.find("*/", pos_ + 2);
      if (close == std::string_view::npos) {
        diags_.error(file_.loc_at(pos_), "unterminated comment: '/*' has no matching '*/'");
        // The comment swallowed the rest of the file (a `}` perhaps): an Error token tells the
        // parser so, and it adds no message of its own.
        unterminated_comment_at_ = pos_;
        pos_ = text_.size();
      } else {
        pos_ = close + 2;
      }
    } else {
      return;
    }
  }
}

bool Lexer::floor_division_comment_after(const char* end) const {
  if (end < text_.data() || end > text_.data() + text_.size()) return false;
  size_t pos = size_t(end - text_.data());
  while (pos < text_.size() && (text_[pos] == ' ' || text_[pos] == '\t')) ++pos;
  if (pos + 2 > text_.size() || text_[pos] != '/' || text_[pos + 1] != '/') return false;
  pos += 2;
  while (pos < text_.size() && (text_[pos] == ' ' || text_[pos] == '\t')) ++pos;
  return pos < text_.size() && (std::isalnum((unsigned char)text_[pos]) || text_[pos] == '(' || text_[pos] == '_');
}

Token Lexer::next() {
  // Past the error limit the rest of the file is not read: a large file that is not a program
  // (a binary, a data file) would otherwise cost time in proportion to its size for nothing.
  if (diags_.error_limit_reached()) pos_ = text_.size();
  skip_whitespace_and_comments();
  size_t begin = pos_;
  if (unterminated_comment_at_) {
    Token token = make(TokenKind::Error, *unterminated_comment_at_);
    token.spelling = text_.substr(*unterminated_comment_at_, 2);
    unterminated_comment_at_.reset();
    return token;
  }
  if (pos_ >= text_.size()) {
    // End of file sits just after the last visible character, where a missing `}` or `;` would go.
    size_t end = text_.find_last_not_of(" \t\r\n\f\v");
    Token token;
    token.kind = TokenKind::EndOfFile;
    token.loc = file_.loc_at(end == std::string_view::npos ? 0 : end + 1);
    return token;
  }
  char c = text_[pos_];
  if (is_digit(c) || (c == '.' && is_digit(peek(1)))) return lex_number(begin);
  if (is_ident_start(c)) return lex_word(begin);
  if (c == '"') return lex_string(begin);

  auto single = [&](TokenKind kind) {
    ++pos_;
    return make(kind, begin);
  };
  auto one_or_two = [&](char second, TokenKind two, TokenKind one) {
    pos_ += peek(1) == second ? 2 : 1;
    return make(pos_ - begin == 2 ? two : one, begin);
  };
  switch (c) {
    case '(': return single(TokenKind::LParen);
    case ')': return single(TokenKind::RParen);
    case '[': return single(TokenKind::LBracket);
    case ']': return single(TokenKind::RBracket);
    case '{': return single(TokenKind::LBrace);
    case '}': return single(TokenKind::RBrace);
    case ',': return single(TokenKind::Comma);
    case ';': return single(TokenKind::Semicolon);
    case ':': return single(TokenKind::Colon);
    case '+': return single(TokenKind::Plus);
    case '-': return single(TokenKind::Minus);
    case '/': return single(TokenKind::Slash);
    case '%': return single(TokenKind::Percent);
    case '@': return single(TokenKind::At);
    case '*': return one_or_two('*', TokenKind::StarStar, TokenKind::Star);
    case '=': return one_or_two('=', TokenKind::EqualEqual, TokenKind::Assign);
    case '!': return one_or_two('=', TokenKind::BangEqual, TokenKind::Bang);
    case '<': return one_or_two('=', TokenKind::LessEqual, TokenKind::Less);
    case '>': return one_or_two('=', TokenKind::GreaterEqual, TokenKind::Greater);
    case '&':
      if (peek(1) == '&') return one_or_two('&', TokenKind::AmpAmp, TokenKind::AmpAmp);
      break;
    case '|':
      if (peek(1) == '|') return one_or_two('|', TokenKind::PipePipe, TokenKind::PipePipe);
      break;
    default: break;
  }
  return lex_unexpected(begin);
}

Token Lexer::lex_unexpected(size_t begin) {
  std::string shown;
  size_t length = utf8_sequence_length(text_.substr(begin));
  unsigned char byte = static_cast<unsigned char>(text_[begin]);
  if (length > 1) {
    shown = std::string(text_.substr(begin, length));
  } else if (byte < 0x20 || byte >= 0x7F) {
    shown = fmt::format("\\x{:02X}", byte);
    length = 1;
  } else {
    shown = std::string(1, static_cast<char>(byte));
    length = 1;
  }
  std::string hint;
  if (byte == '&') hint = " (did you mean '&&'?)";
  if (byte == '|') hint = " (did you mean '||'?)";
  if (length > 1) hint = " (names in .synk are ASCII letters, digits and '_'; other characters only in comments)";
  pos_ = begin + length;
  // A run of stray characters (`$$$`, a pasted binary blob) is one mistake: one message.
  while (pos_ < text_.size() && !can_start_token(pos_)) {
    size_t n = utf8_sequence_length(text_.substr(pos_));
    pos_ += n > 1 ? n : 1;
  }
  diags_.error(file_.loc_at(begin), fmt::format("unexpected character '{}'{}", shown, hint));
  return make(TokenKind::Error, begin);
}

Token Lexer::lex_word(size_t begin) {
  while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
  std::string_view word = text_.substr(begin, pos_ - begin);
  for (const Keyword& keyword : kKeywords) {
    if (keyword.word == word) return make(keyword.kind, begin);
  }
  return make(TokenKind::Identifier, begin);
}

Token Lexer::lex_number(size_t begin) {
  bool is_float = false;
  while (is_digit(peek())) ++pos_;
  if (peek() == '.') {
    is_float = true;
    ++pos_;
    while (is_digit(peek())) ++pos_;
  }
  if (peek() == 'e' || peek() == 'E') {
    size_t exponent = 1;
    if (peek(1) == '+' || peek(1) == '-') exponent = 2;
    if (is_digit(peek(exponent))) {
      is_float = true;
      pos_ += exponent;
      while (is_digit(peek())) ++pos_;
    } else {
      pos_ += exponent;
      while (is_ident_char(peek())) ++pos_;
      return error_token(begin, fmt::format("invalid number '{}': the exponent has no digits",
                                            shorten(text_.substr(begin, pos_ - begin))));
    }
  }
  if (is_ident_char(peek()) || peek() == '.') {
    // `10n`, `1.5f`, `1.2.3`: letters or a second point glued to a number.
    while (is_ident_char(peek()) || peek() == '.') ++pos_;
    return error_token(begin, fmt::format("invalid number '{}'", shorten(text_.substr(begin, pos_ - begin))));
  }
  std::string spelling(text_.substr(begin, pos_ - begin));
  if (!is_float) {
    // Accumulate with an overflow check: std::stoll would throw, strtoll would saturate.
    int64_t value = 0;
    for (char digit : spelling) {
      int d = digit - '0';
      if (value > (std::numeric_limits<int64_t>::max() - d) / 10) {
        return error_token(begin, fmt::format("integer literal '{}' is too large (the largest is {})",
                                              shorten(spelling), std::numeric_limits<int64_t>::max()));
      }
      value = value * 10 + d;
    }
    Token token = make(TokenKind::IntLiteral, begin);
    token.int_value = value;
    return token;
  }
  errno = 0;
  double value = std::strtod(spelling.c_str(), nullptr);
  if (std::isinf(value)) {
    return error_token(begin, fmt::format("float literal '{}' is too large for a 64-bit float",
                                          shorten(spelling)));
  }
  Token token = make(TokenKind::FloatLiteral, begin);
  token.float_value = value;
  return token;
}

Token Lexer::lex_string(size_t begin) {
  ++pos_;  // the opening quote
  std::string value;
  while (true) {
    if (pos_ >= text_.size() || text_[pos_] == '\n' || text_[pos_] == '\r') {
      return error_token(begin, "unterminated string: a string must end with '\"' on the same line");
    }
    char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      break;
    }
    if (c == '\\') {
      char escaped = peek(1);
      if (escaped == '\n' || escaped == '\r' || pos_ + 1 >= text_.size()) {
        ++pos_;
        continue;  // reported as unterminated on the next round
      }
      switch (escaped) {
        case '\\': value += '\\'; break;
        case '"': value += '"'; break;
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        default: {
          size_t length = utf8_sequence_length(text_.substr(pos_ + 1));
          std::string shown = length > 1 ? std::string(text_.substr(pos_ + 1, length))
                              : static_cast<unsigned char>(escaped) < 0x20 || static_cast<unsigned char>(escaped) >= 0x7F
                                  ? fmt::format("x{:02X}", static_cast<unsigned char>(escaped))
                                  : std::string(1, escaped);
          // Reported, but the string stays a string: the parse goes on without a second message.
          diags_.error(file_.loc_at(pos_),
                       fmt::format("unknown escape sequence '\\{}' in string (use \\\\ \\\" \\n or \\t)", shown));
          value += escaped;
          if (length > 1) pos_ += length - 1;
        }
      }
      pos_ += 2;
      continue;
    }
    value += c;
    ++pos_;
  }
  Token token = make(TokenKind::StringLiteral, begin);
  token.string_value = std::move(value);
  return token;
}

std::vector<Token> lex_all(const SourceFile& file, DiagnosticEngine& diags) {
  Lexer lexer(file, diags);
  std::vector<Token> tokens;
  do {
    tokens.push_back(lexer.next());
  } while (tokens.back().kind != TokenKind::EndOfFile);
  return tokens;
}

bool is_keyword(TokenKind kind) {
  return kind >= TokenKind::KwFn && kind <= TokenKind::KwReturn;
}

std::string_view token_kind_name(TokenKind kind) {
  switch (kind) {
    case TokenKind::EndOfFile: return "end of file";
    case TokenKind::Error: return "error";
    case TokenKind::Identifier: return "identifier";
    case TokenKind::IntLiteral: return "integer";
    case TokenKind::FloatLiteral: return "float";
    case TokenKind::StringLiteral: return "string";
    case TokenKind::KwFn: return "'fn'";
    case TokenKind::KwShared: return "'shared'";
    case TokenKind::KwLet: return "'let'";
    case TokenKind::KwOut: return "'out'";
    case TokenKind::KwUpdate: return "'update'";
    case TokenKind::KwScatter: return "'scatter'";
    case TokenKind::KwBcast: return "'bcast'";
    case TokenKind::KwMinibatch: return "'minibatch'";
    case TokenKind::KwSliceable: return "'sliceable'";
    case TokenKind::KwOptimizer: return "'optimizer'";
    case TokenKind::KwMinimize: return "'minimize'";
    case TokenKind::KwDef: return "'def'";
    case TokenKind::KwReturn: return "'return'";
    case TokenKind::KwTrue: return "'true'";
    case TokenKind::KwFalse: return "'false'";
    case TokenKind::LParen: return "'('";
    case TokenKind::RParen: return "')'";
    case TokenKind::LBracket: return "'['";
    case TokenKind::RBracket: return "']'";
    case TokenKind::LBrace: return "'{'";
    case TokenKind::RBrace: return "'}'";
    case TokenKind::Comma: return "','";
    case TokenKind::Semicolon: return "';'";
    case TokenKind::Colon: return "':'";
    case TokenKind::Assign: return "'='";
    case TokenKind::Plus: return "'+'";
    case TokenKind::Minus: return "'-'";
    case TokenKind::Star: return "'*'";
    case TokenKind::Slash: return "'/'";
    case TokenKind::Percent: return "'%'";
    case TokenKind::StarStar: return "'**'";
    case TokenKind::At: return "'@'";
    case TokenKind::EqualEqual: return "'=='";
    case TokenKind::BangEqual: return "'!='";
    case TokenKind::Less: return "'<'";
    case TokenKind::LessEqual: return "'<='";
    case TokenKind::Greater: return "'>'";
    case TokenKind::GreaterEqual: return "'>='";
    case TokenKind::AmpAmp: return "'&&'";
    case TokenKind::PipePipe: return "'||'";
    case TokenKind::Bang: return "'!'";
  }
  return "token";
}

std::string describe_token(const Token& token) {
  switch (token.kind) {
    case TokenKind::EndOfFile: return "end of file";
    case TokenKind::StringLiteral: return "string " + shorten(token.spelling);
    default: return "'" + shorten(token.spelling) + "'";
  }
}

std::string quote_string(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

}  // namespace synk::dsl
