// `nibble test`: runs ONNX backend node-test directories (model.onnx with a
// single node + test_data_set_*/input_N.pb, output_N.pb) through the library.
#ifndef NIBBLE_TOOLS_NODE_TEST_RUNNER_H_
#define NIBBLE_TOOLS_NODE_TEST_RUNNER_H_

#include <iosfwd>
#include <string>
#include <vector>

namespace nibble {

struct NodeTestOptions {
  double rtol = -1;  // < 0: the default for the output type
  double atol = -1;
  int threads = 0;
  bool verbose = false;
};

struct NodeTestSummary {
  int passed = 0, failed = 0, skipped = 0;
};

// Runs every test directory in `paths` (a directory holding test
// directories is searched one level down). A directory with a file
// `expected_error` (one line) is an error case: it passes when the node is
// rejected with a message containing that line. Prints PASS/FAIL/SKIP lines and
// the summary line to `out`.
NodeTestSummary RunNodeTests(const std::vector<std::string>& paths, const NodeTestOptions& options,
                             std::ostream& out);

}  // namespace nibble

#endif  // NIBBLE_TOOLS_NODE_TEST_RUNNER_H_
