// The lexer of `.synk` files (docs/language.md, "Lexical structure"): turns source text into
// tokens, each with the 1-based line and column of its first character (a tab counts as one
// column). It produces tokens on demand so that its errors and the parser's come out in source
// order. A lexical error is reported once, here; the token it leaves behind has kind Error, which
// the parser treats as "already reported" (it recovers without adding a message of its own).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/diagnostics.h"

namespace synk::dsl {

enum class TokenKind : uint8_t {
  EndOfFile,
  Error,          // a lexical error, already reported
  Identifier,
  IntLiteral,
  FloatLiteral,
  StringLiteral,
  // keywords
  KwFn, KwShared, KwLet, KwOut, KwUpdate, KwScatter, KwBcast, KwMinibatch, KwSliceable,
  KwTrue, KwFalse,
  KwOptimizer, KwMinimize,   // training steps (docs/training.md); `over` and `using` are plain names
  KwDef, KwReturn,           // helpers (docs/language.md, "Helpers"); KwReturn is the last keyword
  // punctuation
  LParen, RParen, LBracket, RBracket, LBrace, RBrace, Comma, Semicolon, Colon, Assign,
  Plus, Minus, Star, Slash, Percent, StarStar, At, EqualEqual, BangEqual, Less, LessEqual, Greater,
  GreaterEqual, AmpAmp, PipePipe, Bang,
};

struct Token {
  TokenKind kind = TokenKind::EndOfFile;
  std::string_view spelling;   // the token's text in the source (empty at end of file)
  std::string string_value;    // StringLiteral: the value with escapes decoded
  int64_t int_value = 0;       // IntLiteral
  double float_value = 0;      // FloatLiteral
  SourceLoc loc;
};

class Lexer {
 public:
  // `file` and `diags` must outlive the lexer and its tokens (spellings point into the file).
  Lexer(const SourceFile& file, DiagnosticEngine& diags);
  // The next token; EndOfFile forever once the text is exhausted.
  Token next();
  // Whether a `//` comment follows `end` (a token's end in this file) on the same line and reads
  // like an operand (`x // 2;`): numpy's floor division, which .synk spells floor_divide(a, b).
  bool floor_division_comment_after(const char* end) const;

 private:
  void skip_whitespace_and_comments();
  Token make(TokenKind kind, size_t begin);
  Token error_token(size_t begin, std::string message);
  Token lex_number(size_t begin);
  Token lex_string(size_t begin);
  Token lex_word(size_t begin);
  Token lex_unexpected(size_t begin);
  char peek(size_t ahead = 0) const;
  bool can_start_token(size_t at) const;

  const SourceFile& file_;
  DiagnosticEngine& diags_;
  std::string_view text_;
  size_t pos_ = 0;
  std::optional<size_t> unterminated_comment_at_;
};

// Every token of `file`, ending with one EndOfFile token (convenient for tests).
std::vector<Token> lex_all(const SourceFile& file, DiagnosticEngine& diags);

// A stable name for a kind, for tests and debugging: "identifier", "'('", "'fn'".
std::string_view token_kind_name(TokenKind kind);

// How a message names a token it did not expect: `'out'`, `'42'`, `string "a.npy"`,
// `end of file`.
std::string describe_token(const Token& token);

// A string's spelling as a .synk string literal: quoted, with the escapes the lexer decodes
// (\\, \", \n, \t) written back. Both printers (print_ast, print_module) use it.
std::string quote_string(const std::string& value);

bool is_keyword(TokenKind kind);

}  // namespace synk::dsl
