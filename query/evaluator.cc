#include "query/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/work_budget.h"
#include "storage/json.h"

namespace mayfly::query {
namespace {

namespace bj = boost::json;

// Ranks of the total order: undefined < null < false < true < numbers < strings < arrays < objects.
int rank(const bj::value* value) {
  if (value == nullptr) return 0;
  switch (value->kind()) {
    case bj::kind::null: return 1;
    case bj::kind::bool_: return value->get_bool() ? 3 : 2;
    case bj::kind::int64:
    case bj::kind::uint64:
    case bj::kind::double_: return 4;
    case bj::kind::string: return 5;
    case bj::kind::array: return 6;
    case bj::kind::object: return 7;
  }
  return 0;
}

// Comparison type class (numbers of every JSON kind are one class; false and true are one class).
int type_class(const bj::value& value) {
  const int r = rank(&value);
  return r == 3 ? 2 : r;
}

int compare_numbers(const bj::value& a, const bj::value& b) {
  if (a.is_int64() && b.is_int64()) {
    const int64_t x = a.get_int64(), y = b.get_int64();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const double x = a.to_number<double>(), y = b.to_number<double>();
  return x < y ? -1 : x > y ? 1 : 0;
}

int compare_strings(std::string_view a, std::string_view b) {
  const int c = a.compare(b);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

bool is_number(const bj::value* value) { return value != nullptr && value->is_number(); }
bool is_string(const bj::value* value) { return value != nullptr && value->is_string(); }

Val boolean(bool value) { return Val::own(bj::value(value)); }

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string ascii_upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

}  // namespace

size_t find_substring(std::string_view text, std::string_view needle, size_t from) {
  if (from > text.size() || text.size() - from < needle.size()) return std::string_view::npos;
  if (needle.empty()) return from;
  // Knuth-Morris-Pratt: every text byte is looked at a bounded number of times, whatever the two strings are.
  if (!charge_work(static_cast<int64_t>(needle.size()))) return std::string_view::npos;
  std::vector<uint32_t> fail(needle.size(), 0);
  for (size_t i = 1, k = 0; i < needle.size(); ++i) {
    while (k > 0 && needle[i] != needle[k]) k = fail[k - 1];
    if (needle[i] == needle[k]) ++k;
    fail[i] = static_cast<uint32_t>(k);
  }
  constexpr size_t kChunk = 4096;
  size_t k = 0;
  for (size_t i = from; i < text.size(); ++i) {
    if ((i - from) % kChunk == kChunk - 1 && !charge_work(2 * kChunk)) return std::string_view::npos;
    while (k > 0 && text[i] != needle[k]) k = fail[k - 1];
    if (text[i] == needle[k]) ++k;
    if (k == needle.size()) return i + 1 - k;
  }
  return std::string_view::npos;
}

namespace {

size_t next_code_point(std::string_view s, size_t i) {
  ++i;
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  return i;
}

// One run of a LIKE pattern between two '%': literal bytes and '_' (one code point each).
struct LikeSegment {
  struct Piece {
    bool any = false;     // '_'
    std::string literal;  // otherwise
  };
  std::vector<Piece> pieces;
  size_t code_points = 0;  // how many code points of text a match covers
  size_t bytes = 0;        // pattern bytes (the cost of one attempt)
  bool has_any = false;
  std::string flat;  // without '_': the literal bytes
};

std::vector<LikeSegment> like_segments(std::string_view pattern, std::optional<char> escape) {
  std::vector<LikeSegment> segments(1);
  auto add_literal = [&](std::string_view bytes) {
    LikeSegment& segment = segments.back();
    if (segment.pieces.empty() || segment.pieces.back().any) segment.pieces.emplace_back();
    segment.pieces.back().literal.append(bytes);
    segment.flat.append(bytes);
    segment.bytes += bytes.size();
    for (char c : bytes) {
      if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++segment.code_points;
    }
  };
  size_t p = 0;
  while (p < pattern.size()) {
    const char pc = pattern[p];
    if (escape && pc == *escape && p + 1 < pattern.size()) {
      const size_t end = next_code_point(pattern, p + 1);
      add_literal(pattern.substr(p + 1, end - p - 1));
      p = end;
    } else if (pc == '%') {
      segments.emplace_back();
      ++p;
    } else if (pc == '_') {
      LikeSegment& segment = segments.back();
      segment.pieces.push_back(LikeSegment::Piece{true, {}});
      segment.has_any = true;
      ++segment.code_points;
      ++segment.bytes;
      ++p;
    } else {
      const size_t end = next_code_point(pattern, p);
      add_literal(pattern.substr(p, end - p));
      p = end;
    }
  }
  return segments;
}

// Where a match of `segment` that starts at `at` ends; npos when it does not match there.
size_t match_segment_at(std::string_view text, size_t at, const LikeSegment& segment) {
  for (const LikeSegment::Piece& piece : segment.pieces) {
    if (piece.any) {
      if (at >= text.size()) return std::string_view::npos;
      at = next_code_point(text, at);
    } else {
      if (text.size() - at < piece.literal.size() || text.compare(at, piece.literal.size(), piece.literal) != 0) {
        return std::string_view::npos;
      }
      at += piece.literal.size();
    }
  }
  return at;
}

}  // namespace

// SQL LIKE: % any run, _ one character (one UTF-8 code point), `escape` makes the next pattern character literal.
// The pattern is split at its '%' into segments; the first must match at the start, the last at the end, and each
// one between at its leftmost place after the one before (leftmost leaves the most room, so this is exact). A
// segment of plain characters is found by find_substring, in linear time; one with '_' is tried at each code point,
// every attempt charged to the read's work budget (common/work_budget.h). Never recursive, never quadratic unpaid.
bool like_match(std::string_view text, std::string_view pattern, std::optional<char> escape) {
  constexpr size_t npos = std::string_view::npos;
  if (!charge_work(static_cast<int64_t>(pattern.size()) + 1)) return false;
  const std::vector<LikeSegment> segments = like_segments(pattern, escape);
  if (segments.size() == 1) return match_segment_at(text, 0, segments[0]) == text.size();
  size_t pos = match_segment_at(text, 0, segments.front());
  if (pos == npos) return false;
  for (size_t i = 1; i + 1 < segments.size(); ++i) {
    const LikeSegment& segment = segments[i];
    size_t end = npos;
    if (!segment.has_any) {
      const size_t at = find_substring(text, segment.flat, pos);
      if (at != npos) end = at + segment.flat.size();
    } else {
      for (size_t at = pos; at < text.size() && end == npos; at = next_code_point(text, at)) {
        if (!charge_work(static_cast<int64_t>(segment.bytes) + 1)) return false;
        end = match_segment_at(text, at, segment);
      }
    }
    if (end == npos) return false;
    pos = end;
  }
  // The last segment covers exactly its code points at the end of the text.
  const LikeSegment& last = segments.back();
  if (!charge_work(static_cast<int64_t>(last.bytes) + 1)) return false;
  size_t at = text.size();
  for (size_t i = 0; i < last.code_points; ++i) {
    if (at <= pos) return false;
    --at;
    while (at > pos && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
  }
  return match_segment_at(text, at, last) == text.size();
}

namespace {

// Partial containment for ARRAY_CONTAINS(..., true): every member of `part` equals the member of `whole`.
bool partially_equal(const bj::value& whole, const bj::value& part) {
  if (!whole.is_object() || !part.is_object()) return json_equal(whole, part);
  for (const auto& member : part.get_object()) {
    const bj::value* found = whole.get_object().if_contains(member.key());
    if (found == nullptr || !partially_equal(*found, member.value())) return false;
  }
  return true;
}

std::optional<int64_t> count_value(const std::optional<CountSpec>& spec, const Parameters& parameters,
                                   std::string_view clause, Status& error) {
  if (!spec) return std::nullopt;
  if (spec->literal) return spec->literal;
  auto it = parameters.find(spec->parameter);
  if (it == parameters.end()) {
    error = Status::invalid_argument("parameter " + spec->parameter + " (used by " + std::string(clause) +
                                     ") has no value; pass it with --param " + spec->parameter + "=JSON");
    return std::nullopt;
  }
  const bj::value& value = it->second;
  if (value.is_int64() && value.get_int64() >= 0) return value.get_int64();
  if (value.is_uint64() && value.get_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
    return static_cast<int64_t>(value.get_uint64());
  }
  error = Status::invalid_argument(std::string(clause) + " parameter " + spec->parameter +
                                   " must be a non-negative integer, got " + json::to_json(value));
  return std::nullopt;
}

Status check_parameters(const Expr& expr, const Parameters& parameters) {
  if (expr.kind == ExprKind::kParameter && parameters.find(expr.name) == parameters.end()) {
    return Status::invalid_argument("parameter " + expr.name + " at offset " + std::to_string(expr.position) +
                                    " has no value; pass it with --param " + expr.name + "=JSON");
  }
  for (const ExprPtr& arg : expr.args) MAYFLY_RETURN_IF_ERROR(check_parameters(*arg, parameters));
  return Status::ok();
}

void collect_aggregates(const Expr& expr, std::vector<const Expr*>& out) {
  if (expr.kind == ExprKind::kAggregate) {
    out.push_back(&expr);
    return;  // aggregates do not nest (checked by the parser)
  }
  for (const ExprPtr& arg : expr.args) collect_aggregates(*arg, out);
}

}  // namespace

int order_compare(const bj::value* a, const bj::value* b) {
  const int ra = rank(a), rb = rank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case 4: return compare_numbers(*a, *b);
    case 5: return compare_strings(a->get_string(), b->get_string());
    case 6:
    case 7: return compare_strings(json::to_json(*a), json::to_json(*b));
    default: return 0;  // undefined, null, false, true: equal within the rank
  }
}

bool json_equal(const bj::value& a, const bj::value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case bj::kind::null: return true;
    case bj::kind::bool_: return a.get_bool() == b.get_bool();
    case bj::kind::string: return a.get_string() == b.get_string();
    case bj::kind::array: {
      const bj::array& x = a.get_array();
      const bj::array& y = b.get_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!json_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case bj::kind::object: {
      const bj::object& x = a.get_object();
      const bj::object& y = b.get_object();
      if (x.size() != y.size()) return false;
      for (const auto& member : x) {
        const bj::value* other = y.if_contains(member.key());
        if (other == nullptr || !json_equal(member.value(), *other)) return false;
      }
      return true;
    }
    default: return false;
  }
}

bj::value number_value(double value) {
  constexpr double kExact = 9007199254740992.0;  // 2^53: integers up to here are exact in a double
  if (std::floor(value) == value && std::fabs(value) <= kExact) return bj::value(static_cast<int64_t>(value));
  return bj::value(value);
}

std::string group_key_text(const bj::value* value) {
  if (value == nullptr) return "u";
  if (value->is_number()) {
    const bj::value normalized = value->is_int64() ? *value : number_value(value->to_number<double>());
    return "v" + json::to_json(normalized);
  }
  return "v" + json::to_json(*value);
}

// ---- aggregates --------------------------------------------------------------------------------------------

void Accumulator::add(const Val& value) {
  if (!value.defined()) return;  // undefined values are ignored by every aggregate (COUNT(c.x) counts defined ones)
  const bj::value& v = value.get();
  ++count_;
  switch (aggregate_) {
    case Aggregate::kCount: return;
    case Aggregate::kSum:
    case Aggregate::kAvg:
      if (!v.is_number()) {
        invalid_ = true;
        return;
      }
      sum_ += v.to_number<double>();
      return;
    case Aggregate::kMin:
    case Aggregate::kMax: {
      if (v.is_array() || v.is_object()) {
        invalid_ = true;
        return;
      }
      if (!best_) {
        best_ = v;
        return;
      }
      const int c = order_compare(&v, &*best_);
      if ((aggregate_ == Aggregate::kMin && c < 0) || (aggregate_ == Aggregate::kMax && c > 0)) best_ = v;
      return;
    }
  }
}

Val Accumulator::result() const {
  switch (aggregate_) {
    case Aggregate::kCount: return Val::own(bj::value(count_));
    case Aggregate::kSum:
      if (invalid_ || !std::isfinite(sum_)) return Val();
      return Val::own(number_value(sum_));
    case Aggregate::kAvg:
      if (invalid_ || count_ == 0 || !std::isfinite(sum_)) return Val();
      return Val::own(number_value(sum_ / static_cast<double>(count_)));
    case Aggregate::kMin:
    case Aggregate::kMax:
      if (invalid_ || !best_) return Val();
      return Val::own(*best_);
  }
  return Val();
}

// ---- the evaluator -----------------------------------------------------------------------------------------

Result<Evaluator> Evaluator::create(const Query& query, Parameters parameters) {
  Evaluator evaluator;
  evaluator.query_ = &query;
  for (const Projection& projection : query.projections) {
    MAYFLY_RETURN_IF_ERROR(check_parameters(*projection.expr, parameters));
    collect_aggregates(*projection.expr, evaluator.aggregate_exprs_);
  }
  if (query.where) MAYFLY_RETURN_IF_ERROR(check_parameters(*query.where, parameters));
  for (size_t i = 0; i < evaluator.aggregate_exprs_.size(); ++i) {
    evaluator.aggregate_slots_[evaluator.aggregate_exprs_[i]] = i;
  }
  Status error;
  evaluator.top_ = count_value(query.top, parameters, "TOP", error);
  evaluator.offset_ = count_value(query.offset, parameters, "OFFSET", error);
  evaluator.limit_ = count_value(query.limit, parameters, "LIMIT", error);
  if (!error.is_ok()) return error;
  evaluator.parameters_ = std::move(parameters);
  return evaluator;
}

bool Evaluator::matches(const bj::value& item) const {
  if (!query_->where) return true;
  const Val result = eval(*query_->where, item);
  return result.defined() && result.get().is_bool() && result.get().get_bool();
}

std::optional<bj::value> Evaluator::project(const bj::value& item) const { return project_with(item, nullptr); }

std::optional<bj::value> Evaluator::project_group(const bj::value& first, const std::vector<Val>& results) const {
  return project_with(first, &results);
}

std::optional<bj::value> Evaluator::project_with(const bj::value& item, const std::vector<Val>* aggregates) const {
  const Query& query = *query_;
  if (query.select_star) return item;
  if (query.select_value) {
    Val value = eval(*query.projections[0].expr, item, aggregates);
    if (!value.defined()) return std::nullopt;
    return std::move(value).take();
  }
  bj::object out;
  for (const Projection& projection : query.projections) {
    Val value = eval(*projection.expr, item, aggregates);
    if (value.defined()) out[projection.name] = std::move(value).take();
  }
  return bj::value(std::move(out));
}

Val Evaluator::eval(const Expr& expr, const bj::value& item, const std::vector<Val>* aggregates) const {
  switch (expr.kind) {
    case ExprKind::kLiteral: return expr.undefined_literal ? Val() : Val::ref(expr.literal);
    case ExprKind::kParameter: {
      auto it = parameters_.find(expr.name);
      return it == parameters_.end() ? Val() : Val::ref(it->second);
    }
    case ExprKind::kRoot: return Val::ref(item);
    case ExprKind::kProperty: {
      Val base = eval(*expr.args[0], item, aggregates);
      if (!base.defined() || !base.get().is_object()) return Val();
      const bj::value* member = base.get().get_object().if_contains(expr.name);
      if (member == nullptr) return Val();
      return base.is_owned() ? Val::own(*member) : Val::ref(*member);
    }
    case ExprKind::kIndex: {
      Val base = eval(*expr.args[0], item, aggregates);
      Val index = eval(*expr.args[1], item, aggregates);
      if (!base.defined() || !index.defined()) return Val();
      const bj::value* member = nullptr;
      if (base.get().is_object() && index.get().is_string()) {
        member = base.get().get_object().if_contains(index.get().get_string());
      } else if (base.get().is_array() && index.get().is_number()) {
        const double position = index.get().to_number<double>();
        const bj::array& array = base.get().get_array();
        if (position >= 0 && std::floor(position) == position && position < static_cast<double>(array.size())) {
          member = &array[static_cast<size_t>(position)];
        }
      }
      if (member == nullptr) return Val();
      return base.is_owned() ? Val::own(*member) : Val::ref(*member);
    }
    case ExprKind::kUnary: {
      Val operand = eval(*expr.args[0], item, aggregates);
      const bj::value* v = operand.ptr();
      if (expr.op == Op::kNot) return v != nullptr && v->is_bool() ? boolean(!v->get_bool()) : Val();
      if (!is_number(v)) return Val();
      if (expr.op == Op::kPlus) return operand;
      if (v->is_int64() && v->get_int64() != INT64_MIN) return Val::own(bj::value(-v->get_int64()));
      return Val::own(number_value(-v->to_number<double>()));
    }
    case ExprKind::kBinary: {
      if (expr.op == Op::kAnd || expr.op == Op::kOr) {
        // Three-valued logic; the right side is evaluated only when it can change the outcome.
        Val left = eval(*expr.args[0], item, aggregates);
        const bj::value* l = left.ptr();
        const std::optional<bool> lb = l != nullptr && l->is_bool() ? std::optional<bool>(l->get_bool()) : std::nullopt;
        const bool decisive = expr.op == Op::kAnd ? false : true;
        if (lb == decisive) return boolean(decisive);
        Val right = eval(*expr.args[1], item, aggregates);
        const bj::value* r = right.ptr();
        const std::optional<bool> rb = r != nullptr && r->is_bool() ? std::optional<bool>(r->get_bool()) : std::nullopt;
        if (rb == decisive) return boolean(decisive);
        if (lb && rb) return boolean(!decisive);
        return Val();
      }
      Val left = eval(*expr.args[0], item, aggregates);
      Val right = eval(*expr.args[1], item, aggregates);
      const bj::value* l = left.ptr();
      const bj::value* r = right.ptr();
      if (l == nullptr || r == nullptr) return Val();
      switch (expr.op) {
        case Op::kEqual:
        case Op::kNotEqual: {
          if (type_class(*l) != type_class(*r)) return Val();
          const bool equal = json_equal(*l, *r);
          return boolean(expr.op == Op::kEqual ? equal : !equal);
        }
        case Op::kLess:
        case Op::kLessEqual:
        case Op::kGreater:
        case Op::kGreaterEqual: {
          const int tl = type_class(*l);
          if (tl != type_class(*r) || tl >= 6) return Val();  // different types, arrays, objects: undefined
          const int c = order_compare(l, r);
          switch (expr.op) {
            case Op::kLess: return boolean(c < 0);
            case Op::kLessEqual: return boolean(c <= 0);
            case Op::kGreater: return boolean(c > 0);
            default: return boolean(c >= 0);
          }
        }
        case Op::kConcat:
          if (!l->is_string() || !r->is_string()) return Val();
          return Val::own(bj::value(std::string(l->get_string()) + std::string(r->get_string())));
        default: break;
      }
      if (!l->is_number() || !r->is_number()) return Val();
      const double x = l->to_number<double>(), y = r->to_number<double>();
      double result = 0;
      switch (expr.op) {
        case Op::kAdd: result = x + y; break;
        case Op::kSubtract: result = x - y; break;
        case Op::kMultiply: result = x * y; break;
        case Op::kDivide:
          if (y == 0) return Val();
          result = x / y;
          break;
        case Op::kModulo:
          if (y == 0) return Val();
          result = std::fmod(x, y);
          break;
        default: return Val();
      }
      if (!std::isfinite(result)) return Val();
      return Val::own(number_value(result));
    }
    case ExprKind::kBetween: {
      Val value = eval(*expr.args[0], item, aggregates);
      Val low = eval(*expr.args[1], item, aggregates);
      Val high = eval(*expr.args[2], item, aggregates);
      if (!value.defined() || !low.defined() || !high.defined()) return Val();
      const int t = type_class(value.get());
      if (t != type_class(low.get()) || t != type_class(high.get()) || t >= 6) return Val();
      const bool inside = order_compare(value.ptr(), low.ptr()) >= 0 && order_compare(value.ptr(), high.ptr()) <= 0;
      return boolean(inside != expr.negated);
    }
    case ExprKind::kIn: {
      Val value = eval(*expr.args[0], item, aggregates);
      if (!value.defined()) return Val();
      bool found = false;
      for (size_t i = 1; i < expr.args.size() && !found; ++i) {
        Val candidate = eval(*expr.args[i], item, aggregates);
        found = candidate.defined() && type_class(candidate.get()) == type_class(value.get()) &&
                json_equal(candidate.get(), value.get());
      }
      return boolean(found != expr.negated);
    }
    case ExprKind::kLike: {
      Val value = eval(*expr.args[0], item, aggregates);
      Val pattern = eval(*expr.args[1], item, aggregates);
      if (!is_string(value.ptr()) || !is_string(pattern.ptr())) return Val();
      std::optional<char> escape;
      if (expr.args.size() > 2) {
        Val escape_value = eval(*expr.args[2], item, aggregates);
        if (!is_string(escape_value.ptr()) || escape_value.get().get_string().size() != 1) return Val();
        escape = escape_value.get().get_string()[0];
      }
      const bool matched = like_match(value.get().get_string(), pattern.get().get_string(), escape);
      return boolean(matched != expr.negated);
    }
    case ExprKind::kTernary: {
      Val condition = eval(*expr.args[0], item, aggregates);
      const bool taken = condition.defined() && condition.get().is_bool() && condition.get().get_bool();
      return eval(*expr.args[taken ? 1 : 2], item, aggregates);
    }
    case ExprKind::kCoalesce: {
      Val left = eval(*expr.args[0], item, aggregates);
      if (left.defined()) return left;
      return eval(*expr.args[1], item, aggregates);
    }
    case ExprKind::kCall: return eval_call(expr, item, aggregates);
    case ExprKind::kAggregate: {
      if (aggregates == nullptr) return Val();
      auto it = aggregate_slots_.find(&expr);
      if (it == aggregate_slots_.end() || it->second >= aggregates->size()) return Val();
      const Val& result = (*aggregates)[it->second];
      return result.defined() ? Val::ref(result.get()) : Val();
    }
    case ExprKind::kArray: {
      bj::array out;
      for (const ExprPtr& arg : expr.args) {
        Val value = eval(*arg, item, aggregates);
        if (value.defined()) out.push_back(std::move(value).take());  // undefined elements are left out
      }
      return Val::own(bj::value(std::move(out)));
    }
    case ExprKind::kObject: {
      bj::object out;
      for (size_t i = 0; i < expr.args.size(); ++i) {
        Val value = eval(*expr.args[i], item, aggregates);
        if (value.defined()) out[expr.names[i]] = std::move(value).take();
      }
      return Val::own(bj::value(std::move(out)));
    }
  }
  return Val();
}

Val Evaluator::eval_call(const Expr& expr, const bj::value& item, const std::vector<Val>* aggregates) const {
  Val first = eval(*expr.args[0], item, aggregates);
  const bj::value* a = first.ptr();
  switch (expr.function) {
    case Function::kIsDefined: return boolean(a != nullptr);
    case Function::kIsNull: return boolean(a != nullptr && a->is_null());
    case Function::kIsNumber: return boolean(is_number(a));
    case Function::kIsString: return boolean(is_string(a));
    case Function::kIsBool: return boolean(a != nullptr && a->is_bool());
    case Function::kIsArray: return boolean(a != nullptr && a->is_array());
    case Function::kIsObject: return boolean(a != nullptr && a->is_object());
    case Function::kStartsWith:
    case Function::kEndsWith:
    case Function::kContains: {
      Val second = eval(*expr.args[1], item, aggregates);
      if (!is_string(a) || !is_string(second.ptr())) return Val();
      bool ignore_case = false;
      if (expr.args.size() > 2) {
        Val third = eval(*expr.args[2], item, aggregates);
        if (!third.defined() || !third.get().is_bool()) return Val();
        ignore_case = third.get().get_bool();
      }
      std::string text(a->get_string()), part(second.get().get_string());
      if (ignore_case) {
        text = ascii_lower(text);
        part = ascii_lower(part);
      }
      const std::string_view t(text), p(part);
      if (expr.function == Function::kStartsWith) return boolean(t.substr(0, p.size()) == p);
      if (expr.function == Function::kEndsWith) return boolean(t.size() >= p.size() && t.substr(t.size() - p.size()) == p);
      return boolean(find_substring(t, p) != std::string_view::npos);
    }
    case Function::kLower:
      if (!is_string(a)) return Val();
      return Val::own(bj::value(ascii_lower(a->get_string())));
    case Function::kUpper:
      if (!is_string(a)) return Val();
      return Val::own(bj::value(ascii_upper(a->get_string())));
    case Function::kLength:
      if (!is_string(a)) return Val();
      return Val::own(bj::value(static_cast<int64_t>(json::utf8_length(a->get_string()))));
    case Function::kArrayLength:
      if (a == nullptr || !a->is_array()) return Val();
      return Val::own(bj::value(static_cast<int64_t>(a->get_array().size())));
    case Function::kArrayContains: {
      Val second = eval(*expr.args[1], item, aggregates);
      if (a == nullptr || !a->is_array() || !second.defined()) return a != nullptr && a->is_array() ? boolean(false) : Val();
      bool partial = false;
      if (expr.args.size() > 2) {
        Val third = eval(*expr.args[2], item, aggregates);
        if (!third.defined() || !third.get().is_bool()) return Val();
        partial = third.get().get_bool();
      }
      for (const bj::value& element : a->get_array()) {
        if (partial ? partially_equal(element, second.get()) : json_equal(element, second.get())) return boolean(true);
      }
      return boolean(false);
    }
    case Function::kAbs:
      if (!is_number(a)) return Val();
      if (a->is_int64() && a->get_int64() != INT64_MIN) return Val::own(bj::value(std::llabs(a->get_int64())));
      return Val::own(number_value(std::fabs(a->to_number<double>())));
    case Function::kFloor:
      if (!is_number(a)) return Val();
      if (a->is_int64()) return first;
      return Val::own(number_value(std::floor(a->to_number<double>())));
  }
  return Val();
}

}  // namespace mayfly::query
