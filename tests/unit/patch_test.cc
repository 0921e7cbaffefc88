// Tests for apply_patch: Cosmos DB-style partial document update as a pure function.
#include "storage/patch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "storage/json.h"

namespace mayfly::json {
namespace {

const std::vector<std::string> kImmutable = {"/id", "/tenant/id"};
constexpr std::string_view kDoc =
    R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":1,"c":[10,20,30]},"n":5,"s":"x","ttl":60})";

boost::json::object object_of(std::string_view text) {
  Result<boost::json::value> parsed = parse(text);
  EXPECT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  return parsed->as_object();
}

// The canonical JSON of the patched document; fails the test if the patch is rejected.
std::string patched(std::string_view ops, std::string_view doc = kDoc) {
  Result<boost::json::object> result = apply_patch(object_of(doc), ops, kImmutable);
  EXPECT_TRUE(result.is_ok()) << result.status().to_string();
  return result.is_ok() ? to_json(*result) : "<rejected>";
}

// The error message; fails the test unless the patch is rejected with InvalidArgument.
std::string rejected(std::string_view ops, std::string_view doc = kDoc) {
  Result<boost::json::object> result = apply_patch(object_of(doc), ops, kImmutable);
  EXPECT_FALSE(result.is_ok()) << "accepted: " << (result.is_ok() ? to_json(*result) : "");
  if (result.is_ok()) return "<accepted>";
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  return result.status().message();
}

std::string one(std::string_view op, std::string_view path, std::string_view value = {}) {
  std::string text = R"([{"op":")" + std::string(op) + R"(","path":")" + std::string(path) + "\"";
  if (!value.empty()) text += ",\"value\":" + std::string(value);
  return text + "}]";
}

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// ---- immutable paths ----

TEST(PatchImmutable, AQuotedPartitionKeyPathIsProtectedToo) {
  const std::vector<std::string> immutable = {"/id", R"(/"a b"/"c/d")"};
  Result<boost::json::object> result = apply_patch(object_of(R"({"id":"x","a b":{"c/d":1,"e":2}})"),
                                                   R"([{"op":"set","path":"/a b/c~1d","value":3}])", immutable);
  ASSERT_FALSE(result.is_ok());
  EXPECT_CONTAINS(result.status().message(), "partition key");
  EXPECT_TRUE(apply_patch(object_of(R"({"id":"x","a b":{"c/d":1,"e":2}})"),
                          R"([{"op":"set","path":"/a b/e","value":3}])", immutable)
                  .is_ok());
}

// ---- move ----

TEST(PatchMove, RemovesTheSourceAndSetsTheTarget) {
  EXPECT_EQ(patched(R"([{"op":"move","from":"/s","path":"/moved"}])"),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":1,"c":[10,20,30]},"n":5,"ttl":60,"moved":"x"})");
  // Onto an existing member (replaced), out of an array, into a nested object.
  EXPECT_EQ(patched(R"([{"op":"move","from":"/a/c/1","path":"/n"}])"),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":1,"c":[10,30]},"n":20,"s":"x","ttl":60})");
  EXPECT_EQ(patched(R"([{"op":"move","from":"/n","path":"/a/b"}])"),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":5,"c":[10,20,30]},"s":"x","ttl":60})");
}

TEST(PatchMove, NeedsAnExistingMovableSource) {
  EXPECT_CONTAINS(rejected(R"([{"op":"move","from":"/missing","path":"/b"}])"), "does not exist");
  EXPECT_CONTAINS(rejected(R"([{"op":"move","path":"/b"}])"), "from");
  EXPECT_CONTAINS(rejected(R"([{"op":"move","from":"/s","path":"/b","value":1}])"), "no \"value\"");
  EXPECT_CONTAINS(rejected(R"([{"op":"move","from":"/id","path":"/b"}])"), "the id");
  EXPECT_CONTAINS(rejected(R"([{"op":"move","from":"/tenant","path":"/b"}])"), "partition key");
  EXPECT_CONTAINS(rejected(R"([{"op":"move","from":"/a","path":"/a/x"}])"), "into itself");
  EXPECT_CONTAINS(rejected(R"([{"op":"set","from":"/a","path":"/b","value":1}])"), "only move");
}

// ---- add ----

TEST(PatchAdd, CreatesTopLevelAndNestedMembersAtTheEnd) {
  EXPECT_EQ(patched(one("add", "/new", "[1,{\"k\":null}]")),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":1,"c":[10,20,30]},"n":5,"s":"x","ttl":60,)"
            R"("new":[1,{"k":null}]})");
  EXPECT_EQ(patched(one("add", "/a/d", "true")),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":1,"c":[10,20,30],"d":true},"n":5,"s":"x",)"
            R"("ttl":60})");
}

TEST(PatchAdd, ReplacesAnExistingMemberInPlace) {
  EXPECT_EQ(patched(one("add", "/n", "\"seven\"")),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":1,"c":[10,20,30]},"n":"seven","s":"x",)"
            R"("ttl":60})");
}

TEST(PatchAdd, InsertsIntoArraysBeforeTheIndexOrAppends) {
  const std::string doc = R"({"c":[10,20,30]})";
  EXPECT_EQ(patched(one("add", "/c/0", "5"), doc), R"({"c":[5,10,20,30]})");
  EXPECT_EQ(patched(one("add", "/c/1", "15"), doc), R"({"c":[10,15,20,30]})");
  EXPECT_EQ(patched(one("add", "/c/3", "40"), doc), R"({"c":[10,20,30,40]})");
  EXPECT_EQ(patched(one("add", "/c/-", "40"), doc), R"({"c":[10,20,30,40]})");
  EXPECT_EQ(patched(one("add", "/a/c/-", "40")),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":1,"c":[10,20,30,40]},"n":5,"s":"x","ttl":60})");
}

TEST(PatchAdd, RejectsIndexPastTheEnd) {
  EXPECT_EQ(rejected(one("add", "/a/c/4", "1")),
            "patch operation 1 (add /a/c/4): index 4 is out of range (the array has 3 elements); use 0..3 or '-'");
  EXPECT_CONTAINS(rejected(one("add", "/a/c/99999999999999999999999", "1")), "out of range");
}

// ---- set ----

TEST(PatchSet, CreatesOrReplacesMembers) {
  EXPECT_EQ(patched(R"([{"op":"set","path":"/s","value":"y"},{"op":"set","path":"/a/x","value":{"z":1}}])"),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":1,"c":[10,20,30],"x":{"z":1}},"n":5,"s":"y",)"
            R"("ttl":60})");
}

TEST(PatchSet, ReplacesAnArrayElementOrAppendsAtTheEnd) {
  const std::string doc = R"({"c":[10,20,30]})";
  EXPECT_EQ(patched(one("set", "/c/1", "99"), doc), R"({"c":[10,99,30]})");  // replaced, not inserted
  EXPECT_EQ(patched(one("set", "/c/3", "40"), doc), R"({"c":[10,20,30,40]})");
  EXPECT_EQ(patched(one("set", "/c/-", "40"), doc), R"({"c":[10,20,30,40]})");
  EXPECT_CONTAINS(rejected(one("set", "/c/4", "1"), doc), "index 4 is out of range");
}

// ---- replace ----

TEST(PatchReplace, ReplacesExistingTargets) {
  EXPECT_EQ(patched(R"([{"op":"replace","path":"/n","value":6},{"op":"replace","path":"/a/b","value":[]},)"
                    R"({"op":"replace","path":"/a/c/2","value":"z"}])"),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":[],"c":[10,20,"z"]},"n":6,"s":"x","ttl":60})");
}

TEST(PatchReplace, RejectsMissingTargets) {
  EXPECT_EQ(rejected(one("replace", "/missing", "1")), "patch operation 1 (replace /missing): the path does not exist");
  EXPECT_EQ(rejected(one("replace", "/a/missing", "1")),
            "patch operation 1 (replace /a/missing): the path does not exist");
  EXPECT_EQ(rejected(one("replace", "/a/c/3", "1")),
            "patch operation 1 (replace /a/c/3): the path does not exist (the array has 3 elements)");
  EXPECT_CONTAINS(rejected(one("replace", "/a/c/-", "1")), "'-' (append) can only be used with add and set");
}

// ---- remove ----

TEST(PatchRemove, RemovesMembersKeepingTheOrderOfTheOthers) {
  EXPECT_EQ(patched(one("remove", "/a")), R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"n":5,"s":"x","ttl":60})");
  EXPECT_EQ(patched(one("remove", "/a/b")),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"c":[10,20,30]},"n":5,"s":"x","ttl":60})");
}

TEST(PatchRemove, RemovesArrayElementsShiftingTheRest) {
  const std::string doc = R"({"c":[10,20,30]})";
  EXPECT_EQ(patched(one("remove", "/c/0"), doc), R"({"c":[20,30]})");
  EXPECT_EQ(patched(one("remove", "/c/1"), doc), R"({"c":[10,30]})");
  EXPECT_EQ(patched(R"([{"op":"remove","path":"/c/0"},{"op":"remove","path":"/c/0"}])", doc), R"({"c":[30]})");
}

TEST(PatchRemove, RejectsMissingTargets) {
  EXPECT_EQ(rejected(one("remove", "/nope")), "patch operation 1 (remove /nope): the path does not exist");
  EXPECT_EQ(rejected(one("remove", "/a/nope")), "patch operation 1 (remove /a/nope): the path does not exist");
  EXPECT_CONTAINS(rejected(one("remove", "/a/c/3")), "the path does not exist (the array has 3 elements)");
  EXPECT_CONTAINS(rejected(one("remove", "/a/c/-")), "'-' (append) can only be used with add and set");
}

TEST(PatchRemove, RejectsAValue) {
  EXPECT_EQ(rejected(one("remove", "/n", "1")),
            "patch operation 1 (remove /n): remove takes no \"value\"; leave it out");
}

// ---- parents ----

TEST(PatchParents, ParentMustExistForEveryOp) {
  for (const char* op : {"add", "set", "replace", "incr"}) {
    EXPECT_EQ(rejected(one(op, "/x/y", "1")),
              "patch operation 1 (" + std::string(op) + " /x/y): the parent /x does not exist");
  }
  EXPECT_EQ(rejected(one("remove", "/x/y")), "patch operation 1 (remove /x/y): the parent /x does not exist");
  EXPECT_EQ(rejected(one("set", "/a/c/5/x", "1")),
            "patch operation 1 (set /a/c/5/x): the parent /a/c/5 does not exist");
  EXPECT_EQ(rejected(one("set", "/a/c/-/x", "1")),
            "patch operation 1 (set /a/c/-/x): the parent /a/c/- does not exist");
}

TEST(PatchParents, ParentMustBeAnObjectOrArray) {
  EXPECT_EQ(rejected(one("add", "/n/x", "1")),
            "patch operation 1 (add /n/x): the parent /n is a number, not an object or array");
  EXPECT_CONTAINS(rejected(one("set", "/a/c/0/x", "1")), "the parent /a/c/0 is a number");
  EXPECT_CONTAINS(rejected(one("set", "/s/0", "1")), "the parent /s is a string");
}

TEST(PatchParents, NestedThroughArraysAndObjects) {
  EXPECT_EQ(patched(one("set", "/l/1/k/0", "\"new\""), R"({"l":[{},{"k":["old",2]}]})"),
            R"({"l":[{},{"k":["new",2]}]})");
}

// ---- incr ----

TEST(PatchIncr, AddsIntegers) {
  EXPECT_EQ(patched(one("incr", "/n", "3"), R"({"n":5})"), R"({"n":8})");
  EXPECT_EQ(patched(one("incr", "/n", "-7"), R"({"n":5})"), R"({"n":-2})");
  EXPECT_EQ(patched(one("incr", "/a/b", "1")),
            R"({"id":"d1","tenant":{"id":"t1","name":"acme"},"a":{"b":2,"c":[10,20,30]},"n":5,"s":"x","ttl":60})");
  EXPECT_EQ(patched(one("incr", "/c/2", "1"), R"({"c":[10,20,30]})"), R"({"c":[10,20,31]})");
  const Result<boost::json::object> result = apply_patch(object_of(R"({"n":5})"), one("incr", "/n", "3"), kImmutable);
  ASSERT_TRUE(result.is_ok());
  EXPECT_TRUE(result->at("n").is_int64());
}

TEST(PatchIncr, CreatesAnAbsentMember) {
  EXPECT_EQ(patched(one("incr", "/m", "2.5"), R"({"n":5})"), R"({"n":5,"m":2.5})");
  EXPECT_EQ(patched(one("incr", "/o/m", "4"), R"({"o":{}})"), R"({"o":{"m":4}})");
}

TEST(PatchIncr, ArrayElementMustExist) {
  EXPECT_CONTAINS(rejected(one("incr", "/c/3", "1"), R"({"c":[1,2,3]})"), "the path does not exist");
  EXPECT_CONTAINS(rejected(one("incr", "/c/-", "1"), R"({"c":[1,2,3]})"), "'-' (append)");
}

TEST(PatchIncr, AnyDoubleMakesADouble) {
  EXPECT_EQ(patched(one("incr", "/n", "0.5"), R"({"n":5})"), R"({"n":5.5})");
  EXPECT_EQ(patched(one("incr", "/n", "1.0"), R"({"n":5})"), R"({"n":6.0})");
  EXPECT_EQ(patched(one("incr", "/n", "1"), R"({"n":1.25})"), R"({"n":2.25})");
  EXPECT_EQ(patched(one("incr", "/n", "0.5"), R"({"n":18446744073709551615})"), R"({"n":18446744073709551616.0})");
}

TEST(PatchIncr, IntegerOverflowIsRejected) {
  EXPECT_EQ(rejected(one("incr", "/n", "1"), R"({"n":9223372036854775807})"),
            "patch operation 1 (incr /n): incr overflows: 9223372036854775807 + 1 does not fit in a 64-bit integer");
  EXPECT_CONTAINS(rejected(one("incr", "/n", "-1"), R"({"n":-9223372036854775808})"), "incr overflows");
  EXPECT_CONTAINS(rejected(one("incr", "/n", "1"), R"({"n":18446744073709551615})"), "incr overflows");
  EXPECT_CONTAINS(rejected(one("incr", "/n", "-9223372036854775808"), R"({"n":-1})"), "incr overflows");
  EXPECT_CONTAINS(rejected(one("incr", "/n", "1e308"), R"({"n":1e308})"), "out of the range of a double");
}

TEST(PatchIncr, Uint64IsExact) {
  EXPECT_EQ(patched(one("incr", "/n", "5"), R"({"n":18446744073709551610})"), R"({"n":18446744073709551615})");
  EXPECT_EQ(patched(one("incr", "/n", "18446744073709551610"), R"({"n":-10})"), R"({"n":18446744073709551600})");
  const Result<boost::json::object> back =
      apply_patch(object_of(R"({"n":9223372036854775808})"), one("incr", "/n", "-1"), kImmutable);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(back->at("n").is_int64());  // back in int64 range: stored as int64, like the parser would
  EXPECT_EQ(back->at("n").get_int64(), 9223372036854775807);
}

TEST(PatchIncr, NonNumbersAreRejected) {
  EXPECT_EQ(rejected(one("incr", "/s", "1")),
            "patch operation 1 (incr /s): incr needs the target to be a number, but it is a string");
  EXPECT_CONTAINS(rejected(one("incr", "/b", "1"), R"({"b":true})"), "but it is a boolean");
  EXPECT_CONTAINS(rejected(one("incr", "/b", "1"), R"({"b":null})"), "but it is null");
  EXPECT_EQ(rejected(one("incr", "/n", "\"1\"")),
            "patch operation 1 (incr /n): incr needs a numeric \"value\", not a string");
  EXPECT_CONTAINS(rejected(one("incr", "/n", "true")), "incr needs a numeric \"value\", not a boolean");
  EXPECT_EQ(rejected(one("incr", "/n")), "patch operation 1 (incr /n): a \"value\" is required");
}

// ---- paths ----

TEST(PatchPaths, UnescapesTildeZeroAndTildeOne) {
  const std::string doc = R"({"a/b":1,"m~n":2,"~1":3})";
  EXPECT_EQ(patched(one("replace", "/a~1b", "10"), doc), R"({"a/b":10,"m~n":2,"~1":3})");
  EXPECT_EQ(patched(one("replace", "/m~0n", "20"), doc), R"({"a/b":1,"m~n":20,"~1":3})");
  EXPECT_EQ(patched(one("remove", "/~01"), doc), R"({"a/b":1,"m~n":2})");  // "~01" is "~1", not "/"
  EXPECT_EQ(patched(one("add", "/x~1y", "0"), R"({})"), R"({"x/y":0})");
  EXPECT_CONTAINS(rejected(one("set", "/a~2", "1")), "'~' must be followed by 0 or 1");
  EXPECT_CONTAINS(rejected(one("set", "/a~", "1")), "'~' must be followed by 0 or 1");
}

TEST(PatchPaths, RejectsMalformedPaths) {
  EXPECT_EQ(rejected(one("set", "n", "1")), "patch operation 1 (set n): a path must start with '/', e.g. /n");
  EXPECT_CONTAINS(rejected(one("set", "", "1")), "the document root cannot be patched");
  EXPECT_CONTAINS(rejected(one("set", "/", "1")), "the document root cannot be patched");
  EXPECT_CONTAINS(rejected(one("set", "/a//b", "1")), "the path has an empty segment");
  EXPECT_CONTAINS(rejected(one("set", "/a/", "1")), "the path has an empty segment");
}

TEST(PatchPaths, ArrayIndexesAreStrictDecimal) {
  for (const char* index : {"01", "00", "+1", "-1", "1x", "x", " 1", "1e0"}) {
    EXPECT_CONTAINS(rejected(one("set", "/a/c/" + std::string(index), "1")),
                    "'" + std::string(index) + "' is not an array index");
  }
  EXPECT_CONTAINS(rejected(one("set", "/a/c/01/x", "1")), "'01' is not an array index");  // intermediate segment
  // On an object the same token is an ordinary member name.
  EXPECT_EQ(patched(one("add", "/01", "1"), R"({"x":0})"), R"({"x":0,"01":1})");
}

// ---- body ----

TEST(PatchBody, OneToTenOperations) {
  std::string ten = "[";
  for (int i = 0; i < 10; ++i) ten += std::string(i ? "," : "") + R"({"op":"incr","path":"/n","value":1})";
  EXPECT_EQ(patched(ten + "]", R"({"n":0})"), R"({"n":10})");
  EXPECT_EQ(rejected(ten + R"(,{"op":"incr","path":"/n","value":1}])", R"({"n":0})"),
            "a patch can hold at most 10 operations; this one has 11");
  EXPECT_EQ(rejected("[]"), "a patch needs at least one operation");
}

TEST(PatchBody, MustBeAJsonArray) {
  EXPECT_CONTAINS(rejected(R"({"op":"set","path":"/n","value":1})"), "patch operations must be a JSON array");
  EXPECT_CONTAINS(rejected(R"("set")"), "not a string");
  EXPECT_CONTAINS(rejected("1"), "not a number");
  EXPECT_CONTAINS(rejected(R"([{"op":"set","path":"/n","value":1})"), "patch operations: malformed JSON");
  EXPECT_CONTAINS(rejected(""), "patch operations: malformed JSON");
}

TEST(PatchBody, LargerThanOneMegabyteIsRejected) {
  const std::string prefix = R"([{"op":"set","path":"/big","value":")";
  const std::string suffix = R"("}])";
  const std::string xs(kMaxPatchBytes - prefix.size() - suffix.size(), 'x');
  const std::string fits = prefix + xs + suffix;
  ASSERT_EQ(fits.size(), kMaxPatchBytes);
  EXPECT_EQ(patched(fits, "{}"), R"({"big":")" + xs + R"("})");
  const std::string too_big = prefix + std::string(kMaxPatchBytes, 'x') + suffix;
  EXPECT_CONTAINS(rejected(too_big, "{}"), "the limit is 1048576 (1 MB)");
}

TEST(PatchBody, EachOperationNeedsOpAndPath) {
  EXPECT_EQ(rejected(R"([{"op":"set","path":"/n","value":1},{"path":"/n","value":1}])"),
            "patch operation 2: needs a string \"op\": add, set, replace, remove, incr or move");
  EXPECT_CONTAINS(rejected(R"([{"op":1,"path":"/n","value":1}])"), "needs a string \"op\"");
  EXPECT_EQ(rejected(R"([{"op":"set","value":1}])"), "patch operation 1: needs a string \"path\", e.g. \"/a/b\"");
  EXPECT_CONTAINS(rejected(R"([{"op":"set","path":["n"],"value":1}])"), "needs a string \"path\"");
  for (const char* op : {"add", "set", "replace"}) {
    EXPECT_CONTAINS(rejected(one(op, "/n")), "a \"value\" is required");
  }
  EXPECT_CONTAINS(rejected(R"([["set","/n",1]])"), "patch operation 1: must be an object like");
  EXPECT_EQ(rejected(R"([{"op":"set","path":"/n","valeu":1}])"),
            "patch operation 1: unknown member \"valeu\" (expected op, path and value, and from for move)");
}

TEST(PatchBody, UnknownOpIsRejected) {
  EXPECT_EQ(rejected(one("copy", "/n", "1")),
            "patch operation 1 (copy /n): unknown op; expected add, set, replace, remove, incr or move");
  EXPECT_CONTAINS(rejected(one("Set", "/n", "1")), "unknown op");
  EXPECT_CONTAINS(rejected(one("", "/n", "1")), "unknown op");
}

TEST(PatchBody, NullIsAValue) {
  EXPECT_EQ(patched(one("set", "/n", "null"), R"({"n":5})"), R"({"n":null})");
}

// ---- protected paths ----

TEST(PatchProtected, SystemPropertiesCannotBePatched) {
  const std::string doc = R"({"id":"d","_ts":1,"_etag":"\"e\"","_rid":"r","_self":"s","_attachments":"a"})";
  for (const char* name : {"_ts", "_etag", "_rid", "_self", "_attachments"}) {
    const std::string path = "/" + std::string(name);
    EXPECT_EQ(rejected(one("set", path, "1"), doc),
              "patch operation 1 (set " + path + "): " + path + " is a system property and cannot be patched");
    EXPECT_CONTAINS(rejected(one("remove", path), doc), "is a system property");
    EXPECT_CONTAINS(rejected(one("add", path + "/x", "1"), doc), "is a system property");
  }
  // Only the first segment, and only the exact name, is a system property.
  EXPECT_EQ(patched(one("set", "/_tsx", "1"), "{}"), R"({"_tsx":1})");
  EXPECT_EQ(patched(one("set", "/o/_ts", "1"), R"({"o":{}})"), R"({"o":{"_ts":1}})");
}

TEST(PatchProtected, IdCannotChange) {
  EXPECT_EQ(rejected(one("set", "/id", "\"d2\"")), "patch operation 1 (set /id): the id cannot be changed by patch");
  EXPECT_CONTAINS(rejected(one("replace", "/id", "\"d1\"")), "the id cannot be changed by patch");
  EXPECT_CONTAINS(rejected(one("remove", "/id")), "the id cannot be changed by patch");
  EXPECT_CONTAINS(rejected(one("add", "/id/x", "1")), "this would change the id");
  EXPECT_EQ(patched(one("set", "/idx", "1"), R"({"id":"d"})"), R"({"id":"d","idx":1})");
}

TEST(PatchProtected, PartitionKeyCannotChange) {
  EXPECT_EQ(rejected(one("set", "/tenant/id", "\"t2\"")),
            "patch operation 1 (set /tenant/id): the partition key /tenant/id cannot be changed by patch");
  EXPECT_EQ(rejected(one("remove", "/tenant")),
            "patch operation 1 (remove /tenant): this would change the partition key /tenant/id, which cannot be "
            "changed by patch");
  EXPECT_CONTAINS(rejected(one("set", "/tenant", R"({"id":"t1"})")), "this would change the partition key");
  EXPECT_CONTAINS(rejected(one("add", "/tenant/id", "\"t1\""), R"({"id":"d","tenant":{}})"),
                  "the partition key /tenant/id cannot be changed");  // absent partition key: cannot be added
  // Siblings and look-alikes are ordinary paths.
  EXPECT_EQ(patched(one("set", "/tenant/name", "\"b\""), R"({"tenant":{"id":"t1","name":"a"}})"),
            R"({"tenant":{"id":"t1","name":"b"}})");
  EXPECT_EQ(patched(one("set", "/tenant~1id", "1"), R"({"tenant":{"id":"t1"}})"),
            R"({"tenant":{"id":"t1"},"tenant/id":1})");
}

// ---- atomicity and order ----

TEST(PatchAtomicity, AFailingOperationLeavesNothingApplied) {
  const boost::json::object document = object_of(kDoc);
  const std::string before = to_json(document);
  const Result<boost::json::object> result = apply_patch(document,
                                                         R"([{"op":"set","path":"/n","value":6},)"
                                                         R"({"op":"remove","path":"/s"},)"
                                                         R"({"op":"replace","path":"/missing","value":1}])",
                                                         kImmutable);
  ASSERT_FALSE(result.is_ok());
  EXPECT_EQ(result.status().message(), "patch operation 3 (replace /missing): the path does not exist");
  EXPECT_EQ(to_json(document), before);
}

TEST(PatchAtomicity, SuccessLeavesTheInputUntouched) {
  const boost::json::object document = object_of(kDoc);
  const std::string before = to_json(document);
  EXPECT_TRUE(apply_patch(document, one("remove", "/a"), kImmutable).is_ok());
  EXPECT_EQ(to_json(document), before);
}

TEST(PatchAtomicity, OperationsApplyInOrderAndSeeEarlierOnes) {
  EXPECT_EQ(patched(R"([{"op":"add","path":"/x","value":{}},{"op":"add","path":"/x/y","value":[]},)"
                    R"({"op":"add","path":"/x/y/-","value":1},{"op":"add","path":"/x/y/0","value":0},)"
                    R"({"op":"remove","path":"/x/y/1"}])",
                    "{}"),
            R"({"x":{"y":[0]}})");
  EXPECT_EQ(patched(R"([{"op":"set","path":"/n","value":1},{"op":"set","path":"/n","value":2}])", "{}"), R"({"n":2})");
}

TEST(PatchOrder, NewMembersAppendInOperationOrderAndOthersKeepTheirPlace) {
  EXPECT_EQ(patched(R"([{"op":"set","path":"/z","value":1},{"op":"add","path":"/b","value":2},)"
                    R"({"op":"set","path":"/a","value":3},{"op":"remove","path":"/m"}])",
                    R"({"a":0,"m":0,"y":0})"),
            R"({"a":3,"y":0,"z":1,"b":2})");
}

// ---- ttl ----

TEST(PatchTtl, TtlIsAnOrdinaryPath) {
  EXPECT_EQ(patched(one("set", "/ttl", "-1"), R"({"id":"d","ttl":60})"), R"({"id":"d","ttl":-1})");
  EXPECT_EQ(patched(one("remove", "/ttl"), R"({"id":"d","ttl":60,"x":1})"), R"({"id":"d","x":1})");
  EXPECT_EQ(patched(one("add", "/ttl", "30"), R"({"id":"d"})"), R"({"id":"d","ttl":30})");
  EXPECT_EQ(patched(one("incr", "/ttl", "10"), R"({"id":"d","ttl":60})"), R"({"id":"d","ttl":70})");
  // Not validated here: the caller re-validates the resulting document.
  EXPECT_EQ(patched(one("replace", "/ttl", "0"), R"({"id":"d","ttl":60})"), R"({"id":"d","ttl":0})");
}

}  // namespace
}  // namespace mayfly::json
