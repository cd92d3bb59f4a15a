// `synkc --emit=ast`: the AST as an indented tree, one node per line, two spaces per level, every
// line ending with the node's `@line:col`. Children follow their parent in source order:
//   Shared 'w' sliceable @1:1        (children: its Type, then its initializer if any)
//   Function 'f' @3:1                (children: Params, then statements)
//     Param scatter 'x' @3:6         (child: its Type)
//       Type f32[n, 10] @3:17
//     Out 'z' mode=avg @4:3          (Let: optional Type, then the value; Out/Update: the value)
//       Call 'mean' @4:16            (positional arguments, then Kwarg nodes)
//         Binary '@' @4:23           (located at the operator)
//         Kwarg 'axis' @4:28
//           IntLiteral 0 @4:33
//   Optimizer 'opt' rule=adam @5:1    (children: Kwarg nodes of its hyper-parameters)
//   Minimize using=opt @9:3          (children: the loss, then one `Over 'w'` per variable)
//   Update 'g' using=opt @10:3       (an update that names its optimizer)
//   Helper 'dense' @12:1             (children: HelperParams, each with its Type if annotated,
//     HelperParam 'x' @12:11          then statements)
//     Let 'h', 'c' @13:3             (a let of several names)
//     Return @14:3                   (children: the values)
// The format is meant to be stable for FileCheck tests.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "dsl/frontend.h"
#include "dsl/lexer.h"

namespace synk::dsl {
namespace {

std::string at(SourceLoc loc) { return fmt::format("@{}:{}", loc.line, loc.col); }


class AstPrinter {
 public:
  std::string print(const ast::Program& program) {
    // Items interleave in source order, whichever vector they are in.
    struct Item {
      SourceLoc loc;
      int kind;   // 0 shared, 1 function, 2 optimizer, 3 helper
      size_t index;
    };
    std::vector<Item> items;
    for (size_t i = 0; i < program.shareds.size(); ++i) items.push_back({program.shareds[i].loc, 0, i});
    for (size_t i = 0; i < program.functions.size(); ++i) items.push_back({program.functions[i].loc, 1, i});
    for (size_t i = 0; i < program.optimizers.size(); ++i) items.push_back({program.optimizers[i].loc, 2, i});
    for (size_t i = 0; i < program.helpers.size(); ++i) items.push_back({program.helpers[i].loc, 3, i});
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return a.loc.line < b.loc.line || (a.loc.line == b.loc.line && a.loc.col < b.loc.col);
    });
    for (const Item& item : items) {
      if (item.kind == 0) shared(program.shareds[item.index]);
      if (item.kind == 1) function(program.functions[item.index]);
      if (item.kind == 2) optimizer(program.optimizers[item.index]);
      if (item.kind == 3) helper(program.helpers[item.index]);
    }
    return std::move(out_);
  }

 private:
  void line(int depth, const std::string& text, SourceLoc loc) {
    out_.append(static_cast<size_t>(depth) * 2, ' ');
    out_ += text;
    out_ += ' ';
    out_ += at(loc);
    out_ += '\n';
  }

  void type(int depth, const ast::TypeExpr& t) {
    std::string text = "Type " + t.dtype;
    if (!t.dims.empty()) {
      text += '[';
      for (size_t i = 0; i < t.dims.size(); ++i) {
        if (i) text += ", ";
        text += t.dims[i].size ? std::to_string(*t.dims[i].size) : t.dims[i].symbol;
      }
      text += ']';
    }
    line(depth, text, t.loc);
  }

  void shared(const ast::SharedDecl& decl) {
    line(0, fmt::format("Shared '{}'{}", decl.name, decl.sliceable ? " sliceable" : ""), decl.loc);
    type(1, decl.type);
    if (decl.init) expr(1, *decl.init);
  }

  void optimizer(const ast::OptimizerDecl& decl) {
    line(0, fmt::format("Optimizer '{}' rule={}", decl.name, decl.rule), decl.loc);
    for (const ast::ExprPtr& arg : decl.positional)
      if (arg) expr(1, *arg);
    for (const ast::KwArg& kwarg : decl.hyper_parameters) {
      line(1, fmt::format("Kwarg '{}'", kwarg.name), kwarg.loc);
      if (kwarg.value) expr(2, *kwarg.value);
    }
  }

  void function(const ast::FnDecl& fn) {
    line(0, fmt::format("Function '{}'", fn.name), fn.loc);
    for (const ast::ParamDecl& param : fn.params) {
      line(1, fmt::format("Param {} '{}'", param.role, param.name), param.loc);
      type(2, param.type);
    }
    for (const ast::Stmt& stmt : fn.body) statement(stmt);
  }

  void helper(const ast::HelperDecl& decl) {
    line(0, fmt::format("Helper '{}'", decl.name), decl.loc);
    for (const ast::HelperParam& param : decl.params) {
      line(1, fmt::format("HelperParam '{}'", param.name), param.name_loc);
      if (param.type) type(2, *param.type);
    }
    for (const ast::Stmt& stmt : decl.body) statement(stmt);
  }

  void statement(const ast::Stmt& stmt) {
    if (stmt.kind == ast::StmtKind::Return) {
      line(1, "Return", stmt.loc);
      for (const ast::ExprPtr& value : stmt.values)
        if (value) expr(2, *value);
      return;
    }
    if (stmt.kind == ast::StmtKind::Minimize) {
      // Minimize using=opt: the loss, then one Over node per variable.
      line(1, fmt::format("Minimize using={}", stmt.optimizer), stmt.loc);
      if (stmt.value) expr(2, *stmt.value);
      for (const ast::NameRef& name : stmt.over) line(2, fmt::format("Over '{}'", name.name), name.loc);
      return;
    }
    const char* keyword = stmt.kind == ast::StmtKind::Let ? "Let"
                          : stmt.kind == ast::StmtKind::Out ? "Out"
                                                            : "Update";
    std::string mode = stmt.mode.empty() ? "" : " mode=" + stmt.mode;
    std::string optimizer = stmt.optimizer.empty() ? "" : " using=" + stmt.optimizer;
    std::string names = "'" + stmt.name + "'";
    for (const ast::NameRef& more : stmt.more_names) names += ", '" + more.name + "'";
    line(1, fmt::format("{} {}{}{}", keyword, names, mode, optimizer), stmt.loc);
    if (stmt.type) type(2, *stmt.type);
    if (stmt.value) expr(2, *stmt.value);
  }

  void expr(int depth, const ast::Expr& e) {
    switch (e.kind) {
      case ast::ExprKind::IntLiteral: line(depth, fmt::format("IntLiteral {}", e.int_value), e.loc); break;
      case ast::ExprKind::FloatLiteral: line(depth, "FloatLiteral " + float_text(e.float_value), e.loc); break;
      case ast::ExprKind::BoolLiteral: line(depth, e.int_value ? "BoolLiteral true" : "BoolLiteral false", e.loc); break;
      case ast::ExprKind::StringLiteral: line(depth, "StringLiteral " + quote_string(e.text), e.loc); break;
      case ast::ExprKind::Name: line(depth, fmt::format("Name '{}'", e.text), e.loc); break;
      case ast::ExprKind::Unary: line(depth, fmt::format("Unary '{}'", e.text), e.loc); break;
      case ast::ExprKind::Binary: line(depth, fmt::format("Binary '{}'", e.text), e.loc); break;
      case ast::ExprKind::Call: line(depth, fmt::format("Call '{}'", e.text), e.loc); break;
      case ast::ExprKind::List: line(depth, "List", e.loc); break;
      case ast::ExprKind::Error: line(depth, "Error", e.loc); break;
    }
    for (const ast::ExprPtr& arg : e.args) {
      if (arg) expr(depth + 1, *arg);
    }
    for (const ast::KwArg& kwarg : e.kwargs) {
      line(depth + 1, fmt::format("Kwarg '{}'", kwarg.name), kwarg.loc);
      if (kwarg.value) expr(depth + 2, *kwarg.value);
    }
  }

  std::string out_;
};

}  // namespace

std::string print_ast(const ast::Program& program) { return AstPrinter().print(program); }

}  // namespace synk::dsl
