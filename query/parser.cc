#include "query/parser.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <set>
#include <unordered_map>

#include "storage/json.h"

namespace mayfly::query {
namespace {

enum class TokenKind { kEnd, kIdentifier, kKeyword, kNumber, kString, kParameter, kPunct };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  size_t position = 0;
  std::string text;      // identifier as written; keyword upper-cased; punctuation; string contents (unescaped)
  boost::json::value number;
};

constexpr std::array<std::string_view, 30> kKeywords = {
    "SELECT", "TOP",   "VALUE", "FROM",    "WHERE", "ORDER",  "BY",    "ASC",   "DESC",  "OFFSET",
    "LIMIT",  "AND",   "OR",    "NOT",     "IN",    "BETWEEN", "LIKE", "ESCAPE", "AS",   "GROUP",
    "TRUE",   "FALSE", "NULL",  "UNDEFINED", "DISTINCT", "JOIN", "EXISTS", "ARRAY", "UDF", "HAVING",
};

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

bool is_keyword(std::string_view upper_text) {
  return std::find(kKeywords.begin(), kKeywords.end(), upper_text) != kKeywords.end();
}

bool identifier_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$'; }
bool identifier_part(char c) { return identifier_start(c) || (c >= '0' && c <= '9'); }

struct FunctionSpec {
  std::string_view name;
  Function function;
  size_t min_args;
  size_t max_args;
};
constexpr std::array<FunctionSpec, 17> kFunctions = {{
    {"IS_DEFINED", Function::kIsDefined, 1, 1},
    {"IS_NULL", Function::kIsNull, 1, 1},
    {"IS_NUMBER", Function::kIsNumber, 1, 1},
    {"IS_STRING", Function::kIsString, 1, 1},
    {"IS_BOOL", Function::kIsBool, 1, 1},
    {"IS_ARRAY", Function::kIsArray, 1, 1},
    {"IS_OBJECT", Function::kIsObject, 1, 1},
    {"STARTSWITH", Function::kStartsWith, 2, 3},
    {"ENDSWITH", Function::kEndsWith, 2, 3},
    {"CONTAINS", Function::kContains, 2, 3},
    {"LOWER", Function::kLower, 1, 1},
    {"UPPER", Function::kUpper, 1, 1},
    {"LENGTH", Function::kLength, 1, 1},
    {"ARRAY_CONTAINS", Function::kArrayContains, 2, 3},
    {"ARRAY_LENGTH", Function::kArrayLength, 1, 1},
    {"ABS", Function::kAbs, 1, 1},
    {"FLOOR", Function::kFloor, 1, 1},
}};

std::string function_list() {
  std::string out;
  for (const FunctionSpec& spec : kFunctions) {
    if (!out.empty()) out += ", ";
    out += spec.name;
  }
  return out + ", COUNT, SUM, MIN, MAX, AVG";
}

std::optional<Aggregate> aggregate_named(std::string_view upper_name) {
  if (upper_name == "COUNT") return Aggregate::kCount;
  if (upper_name == "SUM") return Aggregate::kSum;
  if (upper_name == "MIN") return Aggregate::kMin;
  if (upper_name == "MAX") return Aggregate::kMax;
  if (upper_name == "AVG") return Aggregate::kAvg;
  return std::nullopt;
}

class Parser {
 public:
  Parser(std::string_view text, const ParseLimits& limits) : text_(text), limits_(limits) {}

  Result<Query> parse() {
    if (text_.size() > limits_.max_text_bytes) {
      return Status::invalid_argument("query text is " + std::to_string(text_.size()) + " bytes; the limit is " +
                                      std::to_string(limits_.max_text_bytes));
    }
    Status lexed = lex();
    if (!lexed.is_ok()) return lexed;
    Query query;
    if (!parse_query(query)) return error_;
    if (!check(query)) return error_;
    return query;
  }

 private:
  // ---- errors ----------------------------------------------------------------------------------------------

  std::string where(size_t position) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < position && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column) + " (offset " +
           std::to_string(position) + ")";
  }

  static std::string describe(const Token& token) {
    switch (token.kind) {
      case TokenKind::kEnd: return "the end of the query";
      case TokenKind::kKeyword: return "keyword " + token.text;
      case TokenKind::kIdentifier: return "identifier '" + token.text + "'";
      case TokenKind::kNumber: return "number " + storage_json(token.number);
      case TokenKind::kString: return "a string";
      case TokenKind::kParameter: return "parameter " + token.text;
      case TokenKind::kPunct: return "'" + token.text + "'";
    }
    return "?";
  }
  static std::string storage_json(const boost::json::value& value) { return json::to_json(value); }

  bool fail_at(size_t position, const std::string& message) {
    if (error_.is_ok()) error_ = Status::invalid_argument("syntax error at " + where(position) + ": " + message);
    return false;
  }
  bool expected(const std::string& what) { return fail_at(peek().position, "expected " + what + ", found " + describe(peek())); }
  bool semantic_error(size_t position, const std::string& message) {
    if (error_.is_ok()) error_ = Status::invalid_argument("invalid query at " + where(position) + ": " + message);
    return false;
  }

  // ---- lexer -----------------------------------------------------------------------------------------------

  Status lex_error(size_t position, const std::string& message) {
    return Status::invalid_argument("syntax error at " + where(position) + ": " + message);
  }

  Status lex() {
    size_t i = 0;
    const size_t n = text_.size();
    while (true) {
      while (i < n && (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\n' || text_[i] == '\r')) ++i;
      if (i + 1 < n && text_[i] == '-' && text_[i + 1] == '-') {  // comment to the end of the line
        while (i < n && text_[i] != '\n') ++i;
        continue;
      }
      Token token;
      token.position = i;
      if (i >= n) {
        tokens_.push_back(std::move(token));
        return Status::ok();
      }
      const char c = text_[i];
      if (identifier_start(c)) {
        size_t end = i;
        while (end < n && identifier_part(text_[end])) ++end;
        std::string word(text_.substr(i, end - i));
        std::string upper_word = upper(word);
        if (is_keyword(upper_word)) {
          token.kind = TokenKind::kKeyword;
          token.text = std::move(upper_word);
        } else {
          token.kind = TokenKind::kIdentifier;
          token.text = std::move(word);
        }
        i = end;
      } else if (c >= '0' && c <= '9') {
        size_t end = i;
        bool is_float = false;
        while (end < n && text_[end] >= '0' && text_[end] <= '9') ++end;
        if (end < n && text_[end] == '.' && end + 1 < n && text_[end + 1] >= '0' && text_[end + 1] <= '9') {
          is_float = true;
          ++end;
          while (end < n && text_[end] >= '0' && text_[end] <= '9') ++end;
        }
        if (end < n && (text_[end] == 'e' || text_[end] == 'E')) {
          size_t exponent = end + 1;
          if (exponent < n && (text_[exponent] == '+' || text_[exponent] == '-')) ++exponent;
          if (exponent < n && text_[exponent] >= '0' && text_[exponent] <= '9') {
            is_float = true;
            end = exponent;
            while (end < n && text_[end] >= '0' && text_[end] <= '9') ++end;
          }
        }
        if (end < n && identifier_part(text_[end])) return lex_error(end, "malformed number");
        const std::string_view digits = text_.substr(i, end - i);
        int64_t integer = 0;
        auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), integer);
        if (!is_float && ec == std::errc() && ptr == digits.data() + digits.size()) {
          token.number = integer;
        } else {
          Result<boost::json::value> parsed = json::parse(digits);
          if (!parsed.is_ok() || !parsed->is_number()) return lex_error(i, "malformed number");
          token.number = parsed->is_double() ? *parsed : boost::json::value(parsed->to_number<double>());
        }
        token.kind = TokenKind::kNumber;
        i = end;
      } else if (c == '\'' || c == '"') {
        Status status = lex_string(i, token);
        if (!status.is_ok()) return status;
      } else if (c == '@') {
        size_t end = i + 1;
        while (end < n && identifier_part(text_[end])) ++end;
        if (end == i + 1) return lex_error(i, "expected a parameter name after '@'");
        token.kind = TokenKind::kParameter;
        token.text = std::string(text_.substr(i, end - i));
        i = end;
      } else {
        static constexpr std::array<std::string_view, 7> kTwo = {"!=", "<>", "<=", ">=", "??", "||", "=="};
        token.kind = TokenKind::kPunct;
        const std::string_view two = text_.substr(i, 2);
        if (two.size() == 2 && std::find(kTwo.begin(), kTwo.end(), two) != kTwo.end()) {
          token.text = std::string(two);
          i += 2;
        } else if (std::strchr("()[]{},.:?=<>+-*/%", c) != nullptr) {
          token.text = std::string(1, c);
          i += 1;
        } else {
          const auto byte = static_cast<unsigned char>(c);
          return lex_error(i, byte >= 0x20 && byte < 0x7f ? "unexpected character '" + std::string(1, c) + "'"
                                                          : "unexpected byte 0x" + hex_byte(byte));
        }
      }
      tokens_.push_back(std::move(token));
    }
  }

  static std::string hex_byte(unsigned char byte) {
    static constexpr char kHex[] = "0123456789abcdef";
    return std::string{kHex[byte >> 4], kHex[byte & 0xf]};
  }

  // A string literal in single or double quotes, JSON escapes plus \' ; contents must be valid UTF-8 (checked by
  // round-tripping through the JSON parser, which validates it).
  Status lex_string(size_t& i, Token& token) {
    const char quote = text_[i];
    const size_t start = i;
    std::string json_text = "\"";
    ++i;
    while (true) {
      if (i >= text_.size()) return lex_error(start, "unterminated string");
      const char c = text_[i];
      if (c == quote) {
        ++i;
        break;
      }
      if (c == '\\') {
        if (i + 1 >= text_.size()) return lex_error(start, "unterminated string");
        const char next = text_[i + 1];
        if (next == '\'') {
          json_text.push_back('\'');
        } else if (next == '"' || next == '\\' || next == '/' || next == 'b' || next == 'f' || next == 'n' ||
                   next == 'r' || next == 't' || next == 'u') {
          json_text.push_back('\\');
          json_text.push_back(next);
        } else {
          return lex_error(i, "invalid escape sequence in string");
        }
        i += 2;
        continue;
      }
      if (c == '"') {
        json_text += "\\\"";
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return lex_error(i, "control character in string (escape it)");
      } else {
        json_text.push_back(c);
      }
      ++i;
    }
    json_text.push_back('"');
    Result<boost::json::value> parsed = json::parse(json_text);
    if (!parsed.is_ok() || !parsed->is_string()) return lex_error(start, "invalid string (bad escape or UTF-8)");
    token.kind = TokenKind::kString;
    token.text = std::string(parsed->get_string());
    return Status::ok();
  }

  // ---- token helpers ---------------------------------------------------------------------------------------

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(next_ + ahead, tokens_.size() - 1)]; }
  const Token& advance() {
    const Token& token = tokens_[next_];
    if (next_ + 1 < tokens_.size()) ++next_;
    return token;
  }
  bool at_keyword(std::string_view keyword, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kKeyword && peek(ahead).text == keyword;
  }
  bool at_punct(std::string_view punct) const { return peek().kind == TokenKind::kPunct && peek().text == punct; }
  bool accept_keyword(std::string_view keyword) {
    if (!at_keyword(keyword)) return false;
    advance();
    return true;
  }
  bool accept_punct(std::string_view punct) {
    if (!at_punct(punct)) return false;
    advance();
    return true;
  }
  bool expect_keyword(std::string_view keyword) {
    if (accept_keyword(keyword)) return true;
    return expected(std::string(keyword));
  }
  bool expect_punct(std::string_view punct) {
    if (accept_punct(punct)) return true;
    return expected("'" + std::string(punct) + "'");
  }

  // ---- nesting ---------------------------------------------------------------------------------------------

  class Nest {
   public:
    explicit Nest(Parser& parser) : parser_(parser) { ++parser_.nesting_; }
    ~Nest() { --parser_.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    bool ok() {
      if (parser_.nesting_ <= parser_.limits_.max_nesting) return true;
      return parser_.fail_at(parser_.peek().position, "the query nests deeper than " +
                                                          std::to_string(parser_.limits_.max_nesting) + " levels");
    }

   private:
    Parser& parser_;
  };

  // Builds a node and checks the tree depth (a node is one deeper than its deepest child).
  ExprPtr node(ExprKind kind, size_t position, std::vector<ExprPtr> args = {}) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->position = position;
    expr->args = std::move(args);
    int depth = 1;
    for (const ExprPtr& arg : expr->args) depth = std::max(depth, depth_of(*arg) + 1);
    depths_[expr.get()] = depth;
    if (depth > limits_.max_tree_depth) {
      fail_at(position, "the expression is deeper than " + std::to_string(limits_.max_tree_depth) + " levels");
      return nullptr;
    }
    return expr;
  }
  int depth_of(const Expr& expr) const {
    auto it = depths_.find(&expr);
    return it == depths_.end() ? 1 : it->second;
  }

  // ---- grammar ---------------------------------------------------------------------------------------------

  bool parse_query(Query& query) {
    if (!expect_keyword("SELECT")) return false;
    if (accept_keyword("DISTINCT")) query.distinct = true;
    if (accept_keyword("TOP")) {
      query.top.emplace();
      if (!parse_count(*query.top, "TOP")) return false;
    }
    if (!query.distinct && accept_keyword("DISTINCT")) query.distinct = true;  // SELECT TOP n DISTINCT ... too
    if (accept_keyword("VALUE")) query.select_value = true;
    if (!query.select_value && accept_punct("*")) {
      query.select_star = true;
    } else {
      size_t unnamed = 0;
      do {
        Projection projection;
        const size_t position = peek().position;
        projection.expr = parse_expression();
        if (!projection.expr) return false;
        if (accept_keyword("AS")) {
          if (peek().kind != TokenKind::kIdentifier) return expected("a name after AS");
          projection.name = advance().text;
        } else if (peek().kind == TokenKind::kIdentifier && !at_keyword("FROM")) {
          projection.name = advance().text;  // alias without AS
        }
        if (query.select_value) {
          if (!projection.name.empty()) return semantic_error(position, "SELECT VALUE takes no alias");
          query.projections.push_back(std::move(projection));
          break;
        }
        ++unnamed;
        if (projection.name.empty()) {
          const Expr& expr = *projection.expr;
          if (expr.kind == ExprKind::kProperty) {
            projection.name = expr.name;
          } else if (expr.kind == ExprKind::kRoot) {
            projection.name = expr.name;
          } else {
            projection.name = "$" + std::to_string(unnamed);
          }
        }
        for (const Projection& other : query.projections) {
          if (other.name == projection.name) {
            return semantic_error(position, "duplicate property name '" + projection.name +
                                                "' in SELECT (name it with AS)");
          }
        }
        query.projections.push_back(std::move(projection));
      } while (accept_punct(","));
    }
    if (!expect_keyword("FROM")) return false;
    if (peek().kind != TokenKind::kIdentifier) return expected("a container name or alias after FROM");
    query.root = advance().text;
    if (accept_keyword("AS")) {
      if (peek().kind != TokenKind::kIdentifier) return expected("an alias after AS");
      query.root = advance().text;
    } else if (peek().kind == TokenKind::kIdentifier) {
      query.root = advance().text;
    }
    if (at_keyword("JOIN")) return fail_at(peek().position, "JOIN is not supported");
    if (accept_keyword("WHERE")) {
      query.where = parse_expression();
      if (!query.where) return false;
    }
    if (accept_keyword("GROUP")) {
      if (!expect_keyword("BY")) return false;
      do {
        ExprPtr key = parse_expression();
        if (!key) return false;
        query.group_by.push_back(std::move(key));
      } while (accept_punct(","));
    }
    if (accept_keyword("ORDER")) {
      if (!expect_keyword("BY")) return false;
      do {
        OrderKey key;
        key.expr = parse_expression();
        if (!key.expr) return false;
        if (accept_keyword("DESC")) {
          key.descending = true;
        } else {
          accept_keyword("ASC");
        }
        query.order_by.push_back(std::move(key));
      } while (accept_punct(","));
    }
    if (accept_keyword("OFFSET")) {
      query.offset.emplace();
      if (!parse_count(*query.offset, "OFFSET")) return false;
      if (!expect_keyword("LIMIT")) return false;
      query.limit.emplace();
      if (!parse_count(*query.limit, "LIMIT")) return false;
    } else if (at_keyword("LIMIT")) {
      return fail_at(peek().position, "LIMIT needs OFFSET first (OFFSET 0 LIMIT n)");
    }
    if (peek().kind != TokenKind::kEnd) return expected("the end of the query");
    return true;
  }

  bool parse_count(CountSpec& spec, std::string_view clause) {
    spec.position = peek().position;
    if (peek().kind == TokenKind::kNumber && peek().number.is_int64()) {
      const int64_t value = peek().number.as_int64();
      if (value < 0) return fail_at(spec.position, std::string(clause) + " must not be negative");
      spec.literal = value;
      advance();
      return true;
    }
    if (peek().kind == TokenKind::kParameter) {
      spec.parameter = advance().text;
      return true;
    }
    return expected("a non-negative integer or a parameter after " + std::string(clause));
  }

  ExprPtr parse_expression() {
    Nest nest(*this);
    if (!nest.ok()) return nullptr;
    return parse_ternary();
  }

  ExprPtr parse_ternary() {
    ExprPtr condition = parse_coalesce();
    if (!condition) return nullptr;
    if (!at_punct("?")) return condition;
    const size_t position = advance().position;
    ExprPtr if_true = parse_expression();
    if (!if_true) return nullptr;
    if (!expect_punct(":")) return nullptr;
    ExprPtr if_false = parse_expression();
    if (!if_false) return nullptr;
    std::vector<ExprPtr> args;
    args.push_back(std::move(condition));
    args.push_back(std::move(if_true));
    args.push_back(std::move(if_false));
    return node(ExprKind::kTernary, position, std::move(args));
  }

  ExprPtr parse_coalesce() {
    ExprPtr left = parse_or();
    while (left && at_punct("??")) {
      const size_t position = advance().position;
      ExprPtr right = parse_or();
      if (!right) return nullptr;
      left = binary_node(ExprKind::kCoalesce, Op::kNone, position, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr binary_node(ExprKind kind, Op op, size_t position, ExprPtr left, ExprPtr right) {
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(std::move(right));
    ExprPtr expr = node(kind, position, std::move(args));
    if (expr) expr->op = op;
    return expr;
  }

  // A chain of one of the logical operators, `a OR b OR c ...`, as a balanced tree: AND and OR are associative
  // (in the three-valued logic too), and a balanced tree keeps the depth logarithmic, so the queries the SDKs build
  // for read_items — up to 1000 `(c.id = @i AND c.pk = @p) OR ...` — stay far inside max_tree_depth.
  ExprPtr logical_chain(Op op, std::vector<ExprPtr>& operands, const std::vector<size_t>& positions, size_t begin,
                        size_t end) {
    if (end - begin == 1) return std::move(operands[begin]);
    const size_t middle = begin + (end - begin) / 2;
    ExprPtr left = logical_chain(op, operands, positions, begin, middle);
    if (!left) return nullptr;
    ExprPtr right = logical_chain(op, operands, positions, middle, end);
    if (!right) return nullptr;
    return binary_node(ExprKind::kBinary, op, positions[middle - 1], std::move(left), std::move(right));
  }

  template <typename ParseOperand>
  ExprPtr parse_logical(const char* keyword, Op op, ParseOperand parse_operand) {
    std::vector<ExprPtr> operands;
    std::vector<size_t> positions;  // positions[i]: the operator after operands[i]
    ExprPtr first = parse_operand();
    if (!first) return nullptr;
    operands.push_back(std::move(first));
    while (at_keyword(keyword)) {
      positions.push_back(advance().position);
      ExprPtr next = parse_operand();
      if (!next) return nullptr;
      operands.push_back(std::move(next));
    }
    return logical_chain(op, operands, positions, 0, operands.size());
  }

  ExprPtr parse_or() {
    return parse_logical("OR", Op::kOr, [this] { return parse_and(); });
  }

  ExprPtr parse_and() {
    return parse_logical("AND", Op::kAnd, [this] { return parse_not(); });
  }

  ExprPtr parse_not() {
    if (!at_keyword("NOT")) return parse_comparison();
    Nest nest(*this);
    if (!nest.ok()) return nullptr;
    const size_t position = advance().position;
    ExprPtr operand = parse_not();
    if (!operand) return nullptr;
    std::vector<ExprPtr> args;
    args.push_back(std::move(operand));
    ExprPtr expr = node(ExprKind::kUnary, position, std::move(args));
    if (expr) expr->op = Op::kNot;
    return expr;
  }

  std::optional<Op> comparison_op() const {
    if (peek().kind != TokenKind::kPunct) return std::nullopt;
    const std::string& t = peek().text;
    if (t == "=" || t == "==") return Op::kEqual;
    if (t == "!=" || t == "<>") return Op::kNotEqual;
    if (t == "<") return Op::kLess;
    if (t == "<=") return Op::kLessEqual;
    if (t == ">") return Op::kGreater;
    if (t == ">=") return Op::kGreaterEqual;
    return std::nullopt;
  }

  ExprPtr parse_comparison() {
    ExprPtr left = parse_concat();
    while (left) {
      if (std::optional<Op> op = comparison_op()) {
        const size_t position = advance().position;
        ExprPtr right = parse_concat();
        if (!right) return nullptr;
        left = binary_node(ExprKind::kBinary, *op, position, std::move(left), std::move(right));
        continue;
      }
      bool negated = false;
      if (at_keyword("NOT") && (at_keyword("IN", 1) || at_keyword("BETWEEN", 1) || at_keyword("LIKE", 1))) {
        advance();
        negated = true;
      }
      if (at_keyword("BETWEEN")) {
        const size_t position = advance().position;
        ExprPtr low = parse_concat();
        if (!low || !expect_keyword("AND")) return nullptr;
        ExprPtr high = parse_concat();
        if (!high) return nullptr;
        std::vector<ExprPtr> args;
        args.push_back(std::move(left));
        args.push_back(std::move(low));
        args.push_back(std::move(high));
        left = node(ExprKind::kBetween, position, std::move(args));
        if (left) left->negated = negated;
        continue;
      }
      if (at_keyword("IN")) {
        const size_t position = advance().position;
        if (!expect_punct("(")) return nullptr;
        std::vector<ExprPtr> args;
        args.push_back(std::move(left));
        do {
          ExprPtr item = parse_expression();
          if (!item) return nullptr;
          args.push_back(std::move(item));
        } while (accept_punct(","));
        if (!expect_punct(")")) return nullptr;
        left = node(ExprKind::kIn, position, std::move(args));
        if (left) left->negated = negated;
        continue;
      }
      if (at_keyword("LIKE")) {
        const size_t position = advance().position;
        ExprPtr pattern = parse_concat();
        if (!pattern) return nullptr;
        std::vector<ExprPtr> args;
        args.push_back(std::move(left));
        args.push_back(std::move(pattern));
        if (accept_keyword("ESCAPE")) {
          ExprPtr escape = parse_concat();
          if (!escape) return nullptr;
          args.push_back(std::move(escape));
        }
        left = node(ExprKind::kLike, position, std::move(args));
        if (left) left->negated = negated;
        continue;
      }
      if (negated) {
        expected("IN, BETWEEN or LIKE after NOT");
        return nullptr;
      }
      break;
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_additive();
    while (left && at_punct("||")) {
      const size_t position = advance().position;
      ExprPtr right = parse_additive();
      if (!right) return nullptr;
      left = binary_node(ExprKind::kBinary, Op::kConcat, position, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr parse_additive() {
    ExprPtr left = parse_multiplicative();
    while (left && (at_punct("+") || at_punct("-"))) {
      const Op op = peek().text == "+" ? Op::kAdd : Op::kSubtract;
      const size_t position = advance().position;
      ExprPtr right = parse_multiplicative();
      if (!right) return nullptr;
      left = binary_node(ExprKind::kBinary, op, position, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr parse_multiplicative() {
    ExprPtr left = parse_unary();
    while (left && (at_punct("*") || at_punct("/") || at_punct("%"))) {
      const Op op = peek().text == "*" ? Op::kMultiply : peek().text == "/" ? Op::kDivide : Op::kModulo;
      const size_t position = advance().position;
      ExprPtr right = parse_unary();
      if (!right) return nullptr;
      left = binary_node(ExprKind::kBinary, op, position, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr parse_unary() {
    if (!at_punct("-") && !at_punct("+")) return parse_postfix();
    Nest nest(*this);
    if (!nest.ok()) return nullptr;
    const Op op = peek().text == "-" ? Op::kNegate : Op::kPlus;
    const size_t position = advance().position;
    // A negative number literal stays a literal (so "-1" is a constant for TOP, plans and ORDER BY checks).
    if (op == Op::kNegate && peek().kind == TokenKind::kNumber) {
      const Token& number = advance();
      ExprPtr literal = node(ExprKind::kLiteral, position);
      if (!literal) return nullptr;
      if (number.number.is_int64() && number.number.as_int64() != INT64_MIN) {
        literal->literal = -number.number.as_int64();
      } else {
        literal->literal = -number.number.to_number<double>();
      }
      return parse_postfix_on(std::move(literal));
    }
    ExprPtr operand = parse_unary();
    if (!operand) return nullptr;
    std::vector<ExprPtr> args;
    args.push_back(std::move(operand));
    ExprPtr expr = node(ExprKind::kUnary, position, std::move(args));
    if (expr) expr->op = op;
    return expr;
  }

  ExprPtr parse_postfix() {
    ExprPtr base = parse_primary();
    if (!base) return nullptr;
    return parse_postfix_on(std::move(base));
  }

  ExprPtr parse_postfix_on(ExprPtr base) {
    while (base) {
      if (at_punct(".")) {
        const size_t position = advance().position;
        if (peek().kind != TokenKind::kIdentifier && peek().kind != TokenKind::kKeyword) {
          expected("a property name after '.'");
          return nullptr;
        }
        std::string name = advance().text;
        // Keywords are upper-cased by the lexer; a property named like one keeps its spelling.
        if (tokens_[next_ - 1].kind == TokenKind::kKeyword) {
          const Token& token = tokens_[next_ - 1];
          name = std::string(text_.substr(token.position, token.text.size()));
        }
        std::vector<ExprPtr> args;
        args.push_back(std::move(base));
        base = node(ExprKind::kProperty, position, std::move(args));
        if (base) base->name = std::move(name);
      } else if (at_punct("[")) {
        Nest nest(*this);
        if (!nest.ok()) return nullptr;
        const size_t position = advance().position;
        if (peek().kind == TokenKind::kString && peek(1).kind == TokenKind::kPunct && peek(1).text == "]") {
          std::string name = advance().text;
          advance();
          std::vector<ExprPtr> args;
          args.push_back(std::move(base));
          base = node(ExprKind::kProperty, position, std::move(args));
          if (base) base->name = std::move(name);
          continue;
        }
        ExprPtr index = parse_expression();
        if (!index || !expect_punct("]")) return nullptr;
        std::vector<ExprPtr> args;
        args.push_back(std::move(base));
        args.push_back(std::move(index));
        base = node(ExprKind::kIndex, position, std::move(args));
      } else {
        break;
      }
    }
    return base;
  }

  ExprPtr parse_primary() {
    const Token& token = peek();
    const size_t position = token.position;
    switch (token.kind) {
      case TokenKind::kNumber: {
        ExprPtr expr = node(ExprKind::kLiteral, position);
        if (expr) expr->literal = advance().number;
        return expr;
      }
      case TokenKind::kString: {
        ExprPtr expr = node(ExprKind::kLiteral, position);
        if (expr) expr->literal = boost::json::string(advance().text);
        return expr;
      }
      case TokenKind::kParameter: {
        ExprPtr expr = node(ExprKind::kParameter, position);
        if (expr) expr->name = advance().text;
        return expr;
      }
      case TokenKind::kKeyword: {
        if (token.text == "TRUE" || token.text == "FALSE" || token.text == "NULL" || token.text == "UNDEFINED") {
          ExprPtr expr = node(ExprKind::kLiteral, position);
          if (!expr) return nullptr;
          if (token.text == "TRUE") expr->literal = true;
          if (token.text == "FALSE") expr->literal = false;
          if (token.text == "UNDEFINED") expr->undefined_literal = true;
          advance();
          return expr;
        }
        if (token.text == "EXISTS" || token.text == "ARRAY" || token.text == "UDF") {
          fail_at(position, token.text + " is not supported");
          return nullptr;
        }
        expected("an expression");
        return nullptr;
      }
      case TokenKind::kIdentifier: {
        if (peek(1).kind == TokenKind::kPunct && peek(1).text == "(") return parse_call();
        ExprPtr expr = node(ExprKind::kRoot, position);
        if (expr) expr->name = advance().text;
        return expr;
      }
      case TokenKind::kPunct: {
        if (token.text == "(") {
          Nest nest(*this);
          if (!nest.ok()) return nullptr;
          advance();
          if (at_keyword("SELECT")) {
            fail_at(peek().position, "subqueries are not supported");
            return nullptr;
          }
          ExprPtr inner = parse_expression();
          if (!inner || !expect_punct(")")) return nullptr;
          return inner;
        }
        if (token.text == "[") return parse_array();
        if (token.text == "{") return parse_object();
        expected("an expression");
        return nullptr;
      }
      case TokenKind::kEnd: expected("an expression"); return nullptr;
    }
    return nullptr;
  }

  ExprPtr parse_call() {
    const Token& name_token = advance();
    const size_t position = name_token.position;
    const std::string name = name_token.text;
    const std::string upper_name = upper(name);
    advance();  // (
    std::vector<ExprPtr> args;
    {
      Nest nest(*this);
      if (!nest.ok()) return nullptr;
      if (!at_punct(")")) {
        do {
          ExprPtr arg = parse_expression();
          if (!arg) return nullptr;
          args.push_back(std::move(arg));
        } while (accept_punct(","));
      }
      if (!expect_punct(")")) return nullptr;
    }
    if (std::optional<Aggregate> aggregate = aggregate_named(upper_name)) {
      if (args.size() != 1) {
        fail_at(position, upper_name + " takes exactly 1 argument, got " + std::to_string(args.size()));
        return nullptr;
      }
      ExprPtr expr = node(ExprKind::kAggregate, position, std::move(args));
      if (!expr) return nullptr;
      expr->aggregate = *aggregate;
      expr->name = upper_name;
      return expr;
    }
    for (const FunctionSpec& spec : kFunctions) {
      if (spec.name != upper_name) continue;
      if (args.size() < spec.min_args || args.size() > spec.max_args) {
        fail_at(position, std::string(spec.name) + " takes " + std::to_string(spec.min_args) +
                              (spec.max_args != spec.min_args ? " or " + std::to_string(spec.max_args) : "") +
                              " argument" + (spec.max_args == 1 ? "" : "s") + ", got " + std::to_string(args.size()));
        return nullptr;
      }
      ExprPtr expr = node(ExprKind::kCall, position, std::move(args));
      if (!expr) return nullptr;
      expr->function = spec.function;
      expr->name = upper_name;
      return expr;
    }
    fail_at(position, "unknown function '" + name + "' (supported: " + function_list() + ")");
    return nullptr;
  }

  ExprPtr parse_array() {
    Nest nest(*this);
    if (!nest.ok()) return nullptr;
    const size_t position = advance().position;
    std::vector<ExprPtr> args;
    if (!at_punct("]")) {
      do {
        ExprPtr item = parse_expression();
        if (!item) return nullptr;
        args.push_back(std::move(item));
      } while (accept_punct(","));
    }
    if (!expect_punct("]")) return nullptr;
    return node(ExprKind::kArray, position, std::move(args));
  }

  ExprPtr parse_object() {
    Nest nest(*this);
    if (!nest.ok()) return nullptr;
    const size_t position = advance().position;
    std::vector<ExprPtr> args;
    std::vector<std::string> names;
    if (!at_punct("}")) {
      do {
        if (peek().kind != TokenKind::kString && peek().kind != TokenKind::kIdentifier) {
          expected("a property name (identifier or string)");
          return nullptr;
        }
        const size_t name_position = peek().position;
        std::string name = advance().text;
        if (std::find(names.begin(), names.end(), name) != names.end()) {
          semantic_error(name_position, "duplicate property name '" + name + "' in object literal");
          return nullptr;
        }
        if (!expect_punct(":")) return nullptr;
        ExprPtr value = parse_expression();
        if (!value) return nullptr;
        names.push_back(std::move(name));
        args.push_back(std::move(value));
      } while (accept_punct(","));
    }
    if (!expect_punct("}")) return nullptr;
    ExprPtr expr = node(ExprKind::kObject, position, std::move(args));
    if (expr) expr->names = std::move(names);
    return expr;
  }

  // ---- checks after parsing --------------------------------------------------------------------------------

  // Identifiers must name the FROM alias; aggregates may not nest, nor appear outside SELECT.
  bool check_expr(const Expr& expr, const std::string& root, bool aggregates_allowed, bool inside_aggregate) {
    if (expr.kind == ExprKind::kRoot && expr.name != root) {
      return semantic_error(expr.position, "identifier '" + expr.name + "' could not be resolved (the FROM alias is '" +
                                               root + "')");
    }
    if (expr.kind == ExprKind::kAggregate) {
      if (!aggregates_allowed) {
        return semantic_error(expr.position, "aggregate " + expr.name + " is only allowed in the SELECT list");
      }
      if (inside_aggregate) return semantic_error(expr.position, "aggregates cannot be nested");
    }
    for (const ExprPtr& arg : expr.args) {
      if (!check_expr(*arg, root, aggregates_allowed, inside_aggregate || expr.kind == ExprKind::kAggregate)) {
        return false;
      }
    }
    return true;
  }

  static bool contains_aggregate(const Expr& expr) {
    if (expr.kind == ExprKind::kAggregate) return true;
    return std::any_of(expr.args.begin(), expr.args.end(), [](const ExprPtr& arg) { return contains_aggregate(*arg); });
  }

  static bool is_path(const Expr& expr) {
    if (expr.kind == ExprKind::kRoot) return true;
    if (expr.kind == ExprKind::kProperty) return is_path(*expr.args[0]);
    if (expr.kind == ExprKind::kIndex) {
      return is_path(*expr.args[0]) && expr.args[1]->kind == ExprKind::kLiteral && !expr.args[1]->undefined_literal;
    }
    return false;
  }

  // With GROUP BY, the non-aggregate parts of a projection must be grouped expressions (or constants).
  bool only_grouped(const Expr& expr, const std::set<std::string>& grouped) {
    if (expr.kind == ExprKind::kAggregate || expr.kind == ExprKind::kLiteral || expr.kind == ExprKind::kParameter) {
      return true;
    }
    if (grouped.count(canonical_text(expr)) > 0) return true;
    if (expr.kind == ExprKind::kRoot || expr.kind == ExprKind::kProperty || expr.kind == ExprKind::kIndex) {
      return semantic_error(expr.position, "'" + canonical_text(expr) +
                                               "' is neither in GROUP BY nor inside an aggregate");
    }
    return std::all_of(expr.args.begin(), expr.args.end(),
                       [&](const ExprPtr& arg) { return only_grouped(*arg, grouped); });
  }

  bool check(Query& query) {
    for (const Projection& projection : query.projections) {
      if (!check_expr(*projection.expr, query.root, true, false)) return false;
      if (contains_aggregate(*projection.expr)) query.has_aggregates = true;
    }
    if (query.where && !check_expr(*query.where, query.root, false, false)) return false;
    std::set<std::string> grouped;
    for (const ExprPtr& key : query.group_by) {
      if (!check_expr(*key, query.root, false, false)) return false;
      if (!is_path(*key) || key->kind == ExprKind::kRoot) {
        return semantic_error(key->position, "GROUP BY takes property paths such as c.city");
      }
      grouped.insert(canonical_text(*key));
    }
    for (const OrderKey& key : query.order_by) {
      if (!check_expr(*key.expr, query.root, false, false)) return false;
      if (!is_path(*key.expr) || key.expr->kind == ExprKind::kRoot) {
        return semantic_error(key.expr->position, "ORDER BY takes property paths such as c._ts");
      }
    }
    if (!query.group_by.empty()) {
      if (query.select_star) return semantic_error(0, "SELECT * cannot be used with GROUP BY");
      for (const Projection& projection : query.projections) {
        if (!only_grouped(*projection.expr, grouped)) return false;
      }
    }
    if (query.has_aggregates || !query.group_by.empty()) {
      if (!query.order_by.empty()) {
        return semantic_error(query.order_by[0].expr->position, "ORDER BY cannot be combined with aggregates or GROUP BY");
      }
      if (query.group_by.empty()) {
        for (const Projection& projection : query.projections) {
          if (!only_grouped(*projection.expr, grouped)) return false;  // every path must be inside an aggregate
        }
      }
    }
    if (query.top && query.offset) {
      return semantic_error(query.top->position, "TOP cannot be combined with OFFSET LIMIT");
    }
    return true;
  }

  std::string_view text_;
  ParseLimits limits_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
  int nesting_ = 0;
  Status error_;
  std::unordered_map<const Expr*, int> depths_;
};

std::string op_text(Op op) {
  switch (op) {
    case Op::kNot: return "NOT ";
    case Op::kNegate: return "-";
    case Op::kPlus: return "+";
    case Op::kAnd: return " AND ";
    case Op::kOr: return " OR ";
    case Op::kEqual: return " = ";
    case Op::kNotEqual: return " != ";
    case Op::kLess: return " < ";
    case Op::kLessEqual: return " <= ";
    case Op::kGreater: return " > ";
    case Op::kGreaterEqual: return " >= ";
    case Op::kAdd: return " + ";
    case Op::kSubtract: return " - ";
    case Op::kMultiply: return " * ";
    case Op::kDivide: return " / ";
    case Op::kModulo: return " % ";
    case Op::kConcat: return " || ";
    case Op::kNone: break;
  }
  return " ? ";
}

void write_canonical(const Expr& expr, std::string& out) {
  auto list = [&](size_t from, const char* separator) {
    for (size_t i = from; i < expr.args.size(); ++i) {
      if (i > from) out += separator;
      write_canonical(*expr.args[i], out);
    }
  };
  switch (expr.kind) {
    case ExprKind::kLiteral: out += expr.undefined_literal ? "undefined" : json::to_json(expr.literal); return;
    case ExprKind::kParameter:
    case ExprKind::kRoot: out += expr.name; return;
    case ExprKind::kProperty:
      write_canonical(*expr.args[0], out);
      out += "[";
      json::write_json_string(expr.name, out);
      out += "]";
      return;
    case ExprKind::kIndex:
      write_canonical(*expr.args[0], out);
      out += "[";
      write_canonical(*expr.args[1], out);
      out += "]";
      return;
    case ExprKind::kUnary:
      out += "(" + op_text(expr.op);
      write_canonical(*expr.args[0], out);
      out += ")";
      return;
    case ExprKind::kBinary:
      out += "(";
      write_canonical(*expr.args[0], out);
      out += op_text(expr.op);
      write_canonical(*expr.args[1], out);
      out += ")";
      return;
    case ExprKind::kBetween:
      out += "(";
      write_canonical(*expr.args[0], out);
      out += expr.negated ? " NOT BETWEEN " : " BETWEEN ";
      write_canonical(*expr.args[1], out);
      out += " AND ";
      write_canonical(*expr.args[2], out);
      out += ")";
      return;
    case ExprKind::kIn:
      out += "(";
      write_canonical(*expr.args[0], out);
      out += expr.negated ? " NOT IN (" : " IN (";
      list(1, ", ");
      out += "))";
      return;
    case ExprKind::kLike:
      out += "(";
      write_canonical(*expr.args[0], out);
      out += expr.negated ? " NOT LIKE " : " LIKE ";
      write_canonical(*expr.args[1], out);
      if (expr.args.size() > 2) {
        out += " ESCAPE ";
        write_canonical(*expr.args[2], out);
      }
      out += ")";
      return;
    case ExprKind::kTernary:
      out += "(";
      write_canonical(*expr.args[0], out);
      out += " ? ";
      write_canonical(*expr.args[1], out);
      out += " : ";
      write_canonical(*expr.args[2], out);
      out += ")";
      return;
    case ExprKind::kCoalesce:
      out += "(";
      list(0, " ?? ");
      out += ")";
      return;
    case ExprKind::kCall:
    case ExprKind::kAggregate:
      out += expr.name + "(";
      list(0, ", ");
      out += ")";
      return;
    case ExprKind::kArray:
      out += "[";
      list(0, ", ");
      out += "]";
      return;
    case ExprKind::kObject:
      out += "{";
      for (size_t i = 0; i < expr.args.size(); ++i) {
        if (i > 0) out += ", ";
        json::write_json_string(expr.names[i], out);
        out += ": ";
        write_canonical(*expr.args[i], out);
      }
      out += "}";
      return;
  }
}

}  // namespace

Result<Query> parse_query(std::string_view text, const ParseLimits& limits) { return Parser(text, limits).parse(); }

std::string canonical_text(const Expr& expr) {
  std::string out;
  write_canonical(expr, out);
  return out;
}

}  // namespace mayfly::query
