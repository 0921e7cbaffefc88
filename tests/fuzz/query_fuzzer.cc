// libFuzzer entry point for the query parser and evaluator (see query_fuzz_harness.h). Built with clang's
// -fsanitize=fuzzer,address,undefined by tests/fuzz/CMakeLists.txt when clang++ is installed.
//   MAYFLY_FUZZ_SECONDS=600 ctest -R query_libfuzzer   # a long run; or directly:
//   build/tests/fuzz/mayfly-query-fuzzer -max_total_time=600 -dict=tests/fuzz/query.dict NEW_DIR tests/fuzz/query_corpus
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/query_fuzz_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mayfly::query::fuzz::check_query_input(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
