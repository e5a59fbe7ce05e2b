// doctest's main, plus one rule: a run whose filters select no test case
// fails. ctest runs one test case per process by name
// (doctest_discover_tests); a name that does not survive that trip (a ';'
// splits it into CMake list items, a ',' into doctest filters) would
// otherwise "pass" without running anything.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cstdio>

#include "doctest/doctest.h"

namespace {

int g_selected = -1;  // test cases passing the filters (-1: no run ended)

struct SelectionListener : doctest::IReporter {
  explicit SelectionListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_selected = static_cast<int>(stats.numTestCasesPassingFilters);
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("nibble_selection", 1, SelectionListener);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit()) return result;
  if (g_selected == 0) {
    std::fprintf(stderr, "no test case matches the filters: nothing was run\n");
    return result == 0 ? 1 : result;
  }
  return result;
}
