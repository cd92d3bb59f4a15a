// Unit tests of the lexer (token kinds, spellings, values, locations, every lexical error) and of
// the diagnostics layer it reports through (line index, exact diagnostic format with the caret).
#include "dsl/lexer.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "dsl/parser.h"

namespace synk::dsl {

// Readable token kinds in failure messages (found by argument-dependent lookup).
void PrintTo(TokenKind kind, std::ostream* out) { *out << token_kind_name(kind); }

namespace {

struct Lexed {
  std::vector<Token> tokens;
  std::vector<Diagnostic> diagnostics;
};

// The SourceFile lives as long as the test (token spellings point into it).
Lexed lex(const SourceFile& file) {
  DiagnosticEngine diags(file);
  Lexed lexed;
  lexed.tokens = lex_all(file, diags);
  lexed.diagnostics = diags.diagnostics();
  return lexed;
}

std::vector<TokenKind> kinds(const Lexed& lexed) {
  std::vector<TokenKind> result;
  for (const Token& t : lexed.tokens) result.push_back(t.kind);
  return result;
}

using K = TokenKind;

// The one diagnostic `lexed` must have; a caller wraps it in ASSERT_NO_FATAL_FAILURE, so that a
// test goes on to the tokens only when the count was right.
void expect_single_error(const Lexed& lexed, const std::string& message, SourceLoc loc) {
  ASSERT_EQ(lexed.diagnostics.size(), 1u);
  EXPECT_EQ(lexed.diagnostics[0].message, message);
  EXPECT_EQ(lexed.diagnostics[0].loc, loc);
}

TEST(Lexer, TokensOfTheIntroductoryExample) {
  SourceFile file("t.synk",
                  "fn f(scatter x: f32[n, 10], bcast y: f32[10]) {\n"
                  "  out z: avg = mean(x @ y, axis=0);\n"
                  "}\n");
  Lexed lexed = lex(file);
  EXPECT_TRUE(lexed.diagnostics.empty());
  std::vector<K> expected = {
      K::KwFn, K::Identifier, K::LParen, K::KwScatter, K::Identifier, K::Colon, K::Identifier,
      K::LBracket, K::Identifier, K::Comma, K::IntLiteral, K::RBracket, K::Comma, K::KwBcast,
      K::Identifier, K::Colon, K::Identifier, K::LBracket, K::IntLiteral, K::RBracket, K::RParen,
      K::LBrace, K::KwOut, K::Identifier, K::Colon, K::Identifier, K::Assign, K::Identifier,
      K::LParen, K::Identifier, K::At, K::Identifier, K::Comma, K::Identifier, K::Assign,
      K::IntLiteral, K::RParen, K::Semicolon, K::RBrace, K::EndOfFile};
  EXPECT_EQ(kinds(lexed), expected);
  // `mean` on line 2: two spaces, "out z: avg = " is 13 characters, so column 16.
  const Token& mean = lexed.tokens[27];
  EXPECT_EQ(mean.spelling, "mean");
  EXPECT_EQ(mean.loc, (SourceLoc{2, 16}));
  EXPECT_EQ(lexed.tokens[30].spelling, "@");
  EXPECT_EQ(lexed.tokens[30].loc, (SourceLoc{2, 23}));
  EXPECT_EQ(lexed.tokens[10].int_value, 10);
}

TEST(Lexer, EveryPunctuator) {
  SourceFile file("t.synk", "( ) [ ] { } , ; : = + - * / % ** @ == != < <= > >= && || !");
  std::vector<K> expected = {
      K::LParen, K::RParen, K::LBracket, K::RBracket, K::LBrace, K::RBrace, K::Comma,
      K::Semicolon, K::Colon, K::Assign, K::Plus, K::Minus, K::Star, K::Slash, K::Percent, K::StarStar,
      K::At, K::EqualEqual, K::BangEqual, K::Less, K::LessEqual, K::Greater, K::GreaterEqual,
      K::AmpAmp, K::PipePipe, K::Bang, K::EndOfFile};
  Lexed lexed = lex(file);
  EXPECT_TRUE(lexed.diagnostics.empty());
  EXPECT_EQ(kinds(lexed), expected);
}

TEST(Lexer, MaximalMunchWithoutSpaces) {
  SourceFile file("t.synk", "a**-b<=c==!d***e");
  std::vector<K> expected = {K::Identifier, K::StarStar, K::Minus, K::Identifier, K::LessEqual,
                             K::Identifier, K::EqualEqual, K::Bang, K::Identifier, K::StarStar,
                             K::Star, K::Identifier, K::EndOfFile};
  EXPECT_EQ(kinds(lex(file)), expected);
}

TEST(Lexer, KeywordsAndIdentifiers) {
  SourceFile file("t.synk",
                  "fn shared let out update scatter bcast minibatch sliceable true false optimizer minimize "
                  "def return fnx _a1 inf nan zeros f32 avg Out over using");
  std::vector<K> expected = {K::KwFn, K::KwShared, K::KwLet, K::KwOut, K::KwUpdate,
                             K::KwScatter, K::KwBcast, K::KwMinibatch, K::KwSliceable,
                             K::KwTrue, K::KwFalse, K::KwOptimizer, K::KwMinimize, K::KwDef,
                             K::KwReturn};
  for (int i = 0; i < 10; ++i) expected.push_back(K::Identifier);
  expected.push_back(K::EndOfFile);
  EXPECT_EQ(kinds(lex(file)), expected);
}

TEST(Lexer, CommentsAndLocations) {
  SourceFile file("t.synk",
                  "// a line comment\n"
                  "a /* block\n"
                  "   spanning lines */ b\n"
                  "\tc // trailing\n");
  Lexed lexed = lex(file);
  ASSERT_EQ(lexed.tokens.size(), 4u);
  EXPECT_EQ(lexed.tokens[0].loc, (SourceLoc{2, 1}));
  EXPECT_EQ(lexed.tokens[1].loc, (SourceLoc{3, 22}));
  EXPECT_EQ(lexed.tokens[2].loc, (SourceLoc{4, 2}));  // a tab is one column
  // End of file sits just after the last visible character (the end of the comment).
  EXPECT_EQ(lexed.tokens[3].kind, K::EndOfFile);
  EXPECT_EQ(lexed.tokens[3].loc, (SourceLoc{4, 15}));
}

TEST(Lexer, EmptyFileHasOnlyEndOfFile) {
  SourceFile file("t.synk", "");
  Lexed lexed = lex(file);
  ASSERT_EQ(lexed.tokens.size(), 1u);
  EXPECT_EQ(lexed.tokens[0].kind, K::EndOfFile);
  EXPECT_EQ(lexed.tokens[0].loc, (SourceLoc{1, 1}));
}

TEST(Lexer, IntegerLiterals) {
  SourceFile file("t.synk", "0 42 9223372036854775807");
  Lexed lexed = lex(file);
  EXPECT_TRUE(lexed.diagnostics.empty());
  EXPECT_EQ(lexed.tokens[0].int_value, 0);
  EXPECT_EQ(lexed.tokens[1].int_value, 42);
  EXPECT_EQ(lexed.tokens[2].int_value, INT64_MAX);
}

TEST(Lexer, IntegerAboveInt64MaxIsAnError) {
  SourceFile file("t.synk", "x = 9223372036854775808;");
  Lexed lexed = lex(file);
  ASSERT_NO_FATAL_FAILURE(expect_single_error(
      lexed, "integer literal '9223372036854775808' is too large (the largest is 9223372036854775807)", {1, 5}));
  EXPECT_EQ(lexed.tokens[2].kind, K::Error);
  EXPECT_EQ(lexed.tokens[3].kind, K::Semicolon);
}

TEST(Lexer, FloatLiteralForms) {
  SourceFile file("t.synk", "1.5 .5 1. 1e-3 2.5E+4 7e2");
  Lexed lexed = lex(file);
  EXPECT_TRUE(lexed.diagnostics.empty());
  std::vector<double> values = {1.5, 0.5, 1.0, 1e-3, 2.5e4, 700.0};
  ASSERT_EQ(lexed.tokens.size(), values.size() + 1);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(lexed.tokens[i].kind, K::FloatLiteral) << i;
    EXPECT_DOUBLE_EQ(lexed.tokens[i].float_value, values[i]) << i;
  }
}

TEST(Lexer, MalformedNumbers) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"1e", "invalid number '1e': the exponent has no digits"},
      {"2.5e+", "invalid number '2.5e+': the exponent has no digits"},
      {"10n", "invalid number '10n'"},
      {"1.2.3", "invalid number '1.2.3'"},
      {"1e999", "float literal '1e999' is too large for a 64-bit float"},
  };
  for (const Case& c : cases) {
    SourceFile file("t.synk", c.text);
    Lexed lexed = lex(file);
    ASSERT_EQ(lexed.diagnostics.size(), 1u) << c.text;
    EXPECT_EQ(lexed.diagnostics[0].message, c.message);
    EXPECT_EQ(kinds(lexed), (std::vector<K>{K::Error, K::EndOfFile})) << c.text;
  }
}

TEST(Lexer, StringsWithEscapes) {
  SourceFile file("t.synk", R"(load("a\\b\"c\n\t.npy"))");
  Lexed lexed = lex(file);
  EXPECT_TRUE(lexed.diagnostics.empty());
  ASSERT_EQ(lexed.tokens[2].kind, K::StringLiteral);
  EXPECT_EQ(lexed.tokens[2].string_value, "a\\b\"c\n\t.npy");
  EXPECT_EQ(lexed.tokens[3].kind, K::RParen);
}

TEST(Lexer, UnterminatedStringStopsAtTheLineEnd) {
  SourceFile file("t.synk", "x = \"abc;\ny");
  Lexed lexed = lex(file);
  ASSERT_NO_FATAL_FAILURE(
      expect_single_error(lexed, "unterminated string: a string must end with '\"' on the same line", {1, 5}));
  EXPECT_EQ(kinds(lexed), (std::vector<K>{K::Identifier, K::Assign, K::Error, K::Identifier, K::EndOfFile}));
}

TEST(Lexer, UnknownEscapeIsReportedOnceAndTheStringSurvives) {
  SourceFile file("t.synk", R"("a\qb")");
  Lexed lexed = lex(file);
  ASSERT_NO_FATAL_FAILURE(
      expect_single_error(lexed, "unknown escape sequence '\\q' in string (use \\\\ \\\" \\n or \\t)", {1, 3}));
  EXPECT_EQ(lexed.tokens[0].kind, K::StringLiteral);
}

TEST(Lexer, UnexpectedCharacters) {
  struct Case {
    std::string text;
    std::string message;
    uint32_t col;
  } cases[] = {
      {"a $ b", "unexpected character '$'", 3},
      {"a $$$ b", "unexpected character '$'", 3},  // a run is one mistake
      {"a & b", "unexpected character '&' (did you mean '&&'?)", 3},
      {"a | b", "unexpected character '|' (did you mean '||'?)", 3},
      {"a \xC3\xA9 b",
       "unexpected character '\xC3\xA9' (names in .synk are ASCII letters, digits and '_'; other characters only in "
       "comments)",
       3},
      {std::string("a \x01 b"), "unexpected character '\\x01'", 3},
      {std::string("a \xFF b"), "unexpected character '\\xFF'", 3},
      {std::string("a \0 b", 5), "unexpected character '\\x00'", 3},
      {"x.y", "unexpected character '.'", 2},
  };
  for (const Case& c : cases) {
    SourceFile file("t.synk", c.text);
    Lexed lexed = lex(file);
    ASSERT_EQ(lexed.diagnostics.size(), 1u) << c.message;
    EXPECT_EQ(lexed.diagnostics[0].message, c.message);
    EXPECT_EQ(lexed.diagnostics[0].loc, (SourceLoc{1, c.col}));
    EXPECT_EQ(kinds(lexed), (std::vector<K>{K::Identifier, K::Error, K::Identifier, K::EndOfFile}))
        << c.message;
  }
}

TEST(Lexer, UnterminatedBlockComment) {
  SourceFile file("t.synk", "a\n  /* never closed\n b");
  Lexed lexed = lex(file);
  ASSERT_NO_FATAL_FAILURE(expect_single_error(lexed, "unterminated comment: '/*' has no matching '*/'", {2, 3}));
  EXPECT_EQ(kinds(lexed), (std::vector<K>{K::Identifier, K::Error, K::EndOfFile}));
  EXPECT_EQ(lexed.tokens[1].loc, (SourceLoc{2, 3}));
}

TEST(Lexer, DescribeToken) {
  SourceFile file("t.synk", "out 42 \"s.npy\" ;");
  Lexed lexed = lex(file);
  EXPECT_EQ(describe_token(lexed.tokens[0]), "'out'");
  EXPECT_EQ(describe_token(lexed.tokens[1]), "'42'");
  EXPECT_EQ(describe_token(lexed.tokens[2]), "string \"s.npy\"");
  EXPECT_EQ(describe_token(lexed.tokens[3]), "';'");
  EXPECT_EQ(describe_token(lexed.tokens[4]), "end of file");
}

// ---- diagnostics

TEST(Diagnostics, LineIndex) {
  SourceFile file("t.synk", "ab\ncd\r\n\nlast");
  EXPECT_EQ(file.line_text(1), "ab");
  EXPECT_EQ(file.line_text(2), "cd");  // the '\r' of a Windows line ending is not shown
  EXPECT_EQ(file.line_text(3), "");
  EXPECT_EQ(file.line_text(4), "last");
  EXPECT_EQ(file.line_text(5), "");
  EXPECT_EQ(file.line_text(0), "");
  EXPECT_EQ(file.loc_at(0), (SourceLoc{1, 1}));
  EXPECT_EQ(file.loc_at(2), (SourceLoc{1, 3}));
  EXPECT_EQ(file.loc_at(3), (SourceLoc{2, 1}));
  EXPECT_EQ(file.loc_at(8), (SourceLoc{4, 1}));
  EXPECT_EQ(file.loc_at(1000), (SourceLoc{4, 5}));
}

TEST(Diagnostics, ExactFormatWithCaret) {
  SourceFile file("dir/f.synk", "fn f() {\n  out z = $;\n}\n");
  Diagnostic d{Severity::Error, SourceLoc{2, 11}, "unexpected character '$'"};
  EXPECT_EQ(format_diagnostic(file, d),
            "dir/f.synk:2:11: error: unexpected character '$'\n"
            "  out z = $;\n"
            "          ^\n");
}

TEST(Diagnostics, CaretKeepsTabsOfTheSourceLine) {
  SourceFile file("f.synk", "\tlet\tx = 1 $;");
  Diagnostic d{Severity::Error, SourceLoc{1, 12}, "m"};
  EXPECT_EQ(format_diagnostic(file, d), "f.synk:1:12: error: m\n\tlet\tx = 1 $;\n\t   \t      ^\n");
}

TEST(Diagnostics, NotesWarningsAndMissingLocations) {
  SourceFile file("f.synk", "x\n");
  EXPECT_EQ(format_diagnostic(file, {Severity::Note, SourceLoc{1, 1}, "here"}),
            "f.synk:1:1: note: here\nx\n^\n");
  EXPECT_EQ(format_diagnostic(file, {Severity::Warning, SourceLoc{}, "whole file"}),
            "f.synk: warning: whole file\n");
}

TEST(Diagnostics, EngineCountsErrorsOnly) {
  SourceFile file("f.synk", "x\n");
  DiagnosticEngine diags(file);
  EXPECT_FALSE(diags.has_errors());
  diags.warning({1, 1}, "w");
  diags.note({1, 1}, "n");
  EXPECT_FALSE(diags.has_errors());
  diags.error({1, 1}, "e");
  EXPECT_TRUE(diags.has_errors());
  EXPECT_EQ(diags.error_count(), 1u);
  EXPECT_EQ(diags.diagnostics().size(), 3u);
  std::ostringstream out;
  diags.print(out);
  EXPECT_EQ(out.str(), "f.synk:1:1: warning: w\nx\n^\nf.synk:1:1: note: n\nx\n^\nf.synk:1:1: error: e\nx\n^\n");
}

TEST(Diagnostics, SourceOrderKeepsNotesWithTheirError) {
  SourceFile file("f.synk", "a\nb\nc\n");
  DiagnosticEngine diags(file);
  diags.error({3, 1}, "third");
  diags.note({1, 1}, "note of third");
  diags.error({2, 1}, "second");
  diags.error({}, "no location");
  diags.error({1, 1}, "first");
  EXPECT_EQ(format_diagnostics_in_source_order(diags),
            "f.synk:1:1: error: first\na\n^\n"
            "f.synk:2:1: error: second\nb\n^\n"
            "f.synk:3:1: error: third\nc\n^\n"
            "f.synk:1:1: note: note of third\na\n^\n"
            "f.synk: error: no location\n");
}

TEST(Diagnostics, ALongLineIsQuotedAsAWindowAroundTheColumn) {
  // 1000 columns: "0123456789" repeated, with a '$' at column 501.
  std::string line;
  for (int i = 0; i < 100; ++i) line += "0123456789";
  line[500] = '$';
  SourceFile file("f.synk", line + "\n");
  std::string text = format_diagnostic(file, {Severity::Error, SourceLoc{1, 501}, "m"});
  std::string quoted = text.substr(text.find('\n') + 1);
  std::string caret = quoted.substr(quoted.find('\n') + 1);
  quoted = quoted.substr(0, quoted.find('\n'));
  EXPECT_EQ(quoted, "..." + line.substr(400, kMaxQuotedColumns) + "...");
  EXPECT_EQ(caret, std::string(caret.size() - 2, ' ') + "^\n");
  EXPECT_EQ(quoted[caret.size() - 2], '$') << "the caret is under the reported character";
  // Near either end, only the cut end is marked; the caret stays under its character.
  text = format_diagnostic(file, {Severity::Error, SourceLoc{1, 3}, "m"});
  EXPECT_EQ(text, "f.synk:1:3: error: m\n" + line.substr(0, kMaxQuotedColumns) + "...\n  ^\n");
  text = format_diagnostic(file, {Severity::Error, SourceLoc{1, 1001}, "end"});
  EXPECT_EQ(text, "f.synk:1:1001: error: end\n..." + line.substr(800) + "\n" + std::string(203, ' ') + "^\n");
}

TEST(Diagnostics, AWindowNeverCutsAUtf8Character) {
  std::string line;
  for (int i = 0; i < 400; ++i) line += "\xC3\xA9";   // é, two bytes each
  line += '$';
  SourceFile file("f.synk", line);
  std::string text = format_diagnostic(file, {Severity::Error, SourceLoc{1, 801}, "m"});
  std::string quoted = text.substr(text.find('\n') + 1);
  quoted = quoted.substr(0, quoted.find('\n'));
  ASSERT_TRUE(quoted.starts_with("...\xC3\xA9")) << quoted;
  EXPECT_TRUE(quoted.ends_with("\xC3\xA9$")) << quoted;
  // The caret counts characters, not bytes: one space per é shown, three for "...".
  size_t shown = (quoted.size() - 4) / 2;
  EXPECT_TRUE(text.ends_with("\n" + std::string(3 + shown, ' ') + "^\n")) << text;
}

TEST(Diagnostics, EngineStopsAfterTheErrorLimit) {
  SourceFile file("f.synk", "x\n");
  DiagnosticEngine diags(file);
  for (size_t i = 0; i < DiagnosticEngine::kErrorLimit; ++i) diags.error({1, 1}, "e" + std::to_string(i));
  EXPECT_FALSE(diags.error_limit_reached()) << "exactly the limit is not too many";
  diags.error({1, 1}, "one too many");
  diags.note({1, 1}, "its note");
  diags.error({1, 1}, "later");
  EXPECT_TRUE(diags.error_limit_reached());
  EXPECT_EQ(diags.error_count(), DiagnosticEngine::kErrorLimit);
  ASSERT_EQ(diags.diagnostics().size(), DiagnosticEngine::kErrorLimit + 1);
  EXPECT_EQ(format_diagnostic(file, diags.diagnostics().back()), "f.synk: error: too many errors (20); stopping\n");
  EXPECT_TRUE(format_diagnostics_in_source_order(diags).ends_with("f.synk:1:1: error: e19\nx\n^\n"
                                                                  "f.synk: error: too many errors (20); stopping\n"));
}

TEST(Lexer, StopsReadingAtTheErrorLimit) {
  // A large file that is not a program: every '$' is one error; the lexer gives up after the limit.
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "$a ";
  SourceFile file("big.bin", text);
  Lexed lexed = lex(file);
  ASSERT_EQ(lexed.diagnostics.size(), DiagnosticEngine::kErrorLimit + 1);
  EXPECT_EQ(lexed.diagnostics.back().message, "too many errors (20); stopping");
  EXPECT_LT(lexed.tokens.size(), 100u);
  EXPECT_EQ(lexed.tokens.back().kind, K::EndOfFile);
}

TEST(Lexer, AByteOrderMarkIsSkipped) {
  SourceFile file("bom.synk", "\xEF\xBB\xBF" "fn $");
  EXPECT_EQ(file.text(), "fn $");
  EXPECT_EQ(file.line_text(1), "fn $");
  Lexed lexed = lex(file);
  ASSERT_NO_FATAL_FAILURE(expect_single_error(lexed, "unexpected character '$'", {1, 4}));
  EXPECT_EQ(lexed.tokens[0].kind, K::KwFn);
  EXPECT_EQ(lexed.tokens[0].loc, (SourceLoc{1, 1}));
}

TEST(Diagnostics, InternalErrorIsNotAUserError) {
  EXPECT_THROW(internal_error("broken invariant"), InternalError);
  try {
    SYNK_CHECK(1 + 1 == 3, "arithmetic");
    FAIL() << "SYNK_CHECK did not throw";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("arithmetic"), std::string::npos);
  }
}

}  // namespace
}  // namespace synk::dsl
