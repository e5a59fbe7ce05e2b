#include "tools/node_test_runner.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>

#include "base/numeric.h"
#include "formats/files.h"
#include "onnx/onnx_node.h"
#include "onnx/onnx_tensor.h"

namespace nibble {

namespace fs = std::filesystem;

namespace {

bool IsTestDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "model.onnx", ec);
}

// Empty string when equal within tolerance, else the reason.
std::string Compare(const Tensor& got, const Tensor& want, const NodeTestOptions& opt) {
  if (got.dtype() != want.dtype()) {
    return "output type " + DTypeName(got.dtype()) + ", expected " + DTypeName(want.dtype());
  }
  if (got.shape() != want.shape()) {
    return "output shape " + ShapeToString(got.shape()) + ", expected " +
           ShapeToString(want.shape());
  }
  double rtol = 1e-5, atol = 1e-6;
  if (want.dtype() == DType::kFloat16) rtol = 2e-3, atol = 1e-7;
  if (want.dtype() == DType::kBFloat16) rtol = 1e-2, atol = 1e-7;
  if (!IsFloat16Or32(want.dtype())) {
    return "cannot compare outputs of type " + DTypeName(want.dtype());
  }
  if (opt.rtol >= 0) rtol = opt.rtol;
  if (opt.atol >= 0) atol = opt.atol;
  const int64_t n = *CheckedNumElements(want.shape(), "output");
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < n; ++k) {
    const double y = FloatElement(got.view(), k), e = FloatElement(want.view(), k);
    bool ok;
    if (std::isnan(e) || std::isnan(y)) {
      ok = std::isnan(e) && std::isnan(y);
    } else if (std::isinf(e) || std::isinf(y)) {
      ok = y == e;
    } else {
      ok = std::fabs(y - e) <= atol + rtol * std::fabs(e);
    }
    if (!ok && bad++ == 0) first = k;
  }
  if (bad == 0) return "";
  std::ostringstream s;
  s.precision(9);
  s << bad << " of " << n << " elements differ; first at flat index " << first << ": got "
    << FloatElement(got.view(), first) << ", expected " << FloatElement(want.view(), first)
    << " (rtol " << rtol << ", atol " << atol << ")";
  return s.str();
}

struct Outcome {
  enum Kind { kPass, kFail, kSkip } kind;
  std::string reason;
};

Outcome RunOne(const fs::path& dir, const NodeTestOptions& opt) {
  nibble_onnx::ModelProto model;
  Status st = ReadProtoFile((dir / "model.onnx").string(), &model);
  if (!st.ok()) return {Outcome::kFail, st.message()};
  const auto& graph = model.graph();
  if (graph.node_size() != 1) {
    return {Outcome::kFail, "model has " + std::to_string(graph.node_size()) +
                                " nodes; a node test has exactly one"};
  }
  const auto& node = graph.node(0);
  if (!IsSupportedNode(node)) return {Outcome::kSkip, NodeKind(node) + " not supported"};

  // Initializers are inputs too.
  std::map<std::string, Tensor> constants;
  for (const auto& init : graph.initializer()) {
    auto t = TensorFromProto(init);
    if (!t.ok()) return {Outcome::kFail, t.status().message()};
    constants[init.name()] = std::move(*t);
  }
  // A file `expected_error` makes the directory an error case.
  std::string expected_error;
  if (PathExists((dir / "expected_error").string())) {
    auto text =
        ReadSmallFile((dir / "expected_error").string(), kMaxJsonFileBytes, "expected_error");
    if (!text.ok()) return {Outcome::kFail, text.status().message()};
    expected_error = text->substr(0, text->find('\n'));
  }
  std::vector<fs::path> sets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) {
      sets.push_back(e.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {Outcome::kFail, "no test_data_set_* directory"};
  for (const auto& set : sets) {
    std::map<std::string, Tensor> values = constants;
    // input_N.pb feeds the N-th graph input that is not an initializer.
    std::vector<std::string> feeds;
    for (const auto& in : graph.input()) {
      if (!constants.count(in.name())) feeds.push_back(in.name());
    }
    for (size_t k = 0;; ++k) {
      const fs::path f = set / ("input_" + std::to_string(k) + ".pb");
      if (!fs::exists(f)) break;
      if (k >= feeds.size()) {
        return {Outcome::kFail, f.string() + " has no matching graph input"};
      }
      nibble_onnx::TensorProto tp;
      st = ReadProtoFile(f.string(), &tp);
      if (!st.ok()) return {Outcome::kFail, st.message()};
      auto t = TensorFromProto(tp);
      if (!t.ok()) return {Outcome::kFail, t.status().message()};
      values[feeds[k]] = std::move(*t);
    }
    std::vector<TensorView> views;
    views.reserve(static_cast<size_t>(node.input_size()));
    std::vector<const TensorView*> inputs;
    for (const auto& name : node.input()) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      auto it = values.find(name);
      if (it == values.end()) return {Outcome::kFail, "no value for node input '" + name + "'"};
      views.push_back(it->second.view());
      inputs.push_back(&views.back());
    }
    auto y = RunNode(node, inputs, ModelOpset(model, ""), opt.threads);
    if (!expected_error.empty()) {
      // An error case: passes when the node is rejected with that message.
      if (y.ok()) return {Outcome::kFail, "expected an error containing '" + expected_error + "'"};
      if (y.status().message().find(expected_error) == std::string::npos) {
        return {Outcome::kFail,
                "error '" + y.status().message() + "' does not contain '" + expected_error + "'"};
      }
      continue;
    }
    if (!y.ok()) return {Outcome::kFail, y.status().message()};
    nibble_onnx::TensorProto want_p;
    st = ReadProtoFile((set / "output_0.pb").string(), &want_p);
    if (!st.ok()) return {Outcome::kFail, st.message()};
    auto want = TensorFromProto(want_p);
    if (!want.ok()) return {Outcome::kFail, want.status().message()};
    const std::string diff = Compare(*y, *want, opt);
    if (!diff.empty()) return {Outcome::kFail, set.filename().string() + ": " + diff};
  }
  return {Outcome::kPass, ""};
}

}  // namespace

NodeTestSummary RunNodeTests(const std::vector<std::string>& paths, const NodeTestOptions& options,
                             std::ostream& out) {
  NodeTestSummary sum;
  std::vector<fs::path> dirs;
  for (const auto& p : paths) {
    const fs::path path(p);
    std::error_code ec;
    if (IsTestDir(path)) {
      dirs.push_back(path);
      continue;
    }
    if (!fs::is_directory(path, ec)) {
      out << "FAIL " << p << ": not a directory\n";
      ++sum.failed;
      continue;
    }
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.is_directory() && IsTestDir(e.path())) found.push_back(e.path());
    }
    if (found.empty()) {
      out << "FAIL " << p << ": no model.onnx here or one level down\n";
      ++sum.failed;
    }
    std::sort(found.begin(), found.end());
    dirs.insert(dirs.end(), found.begin(), found.end());
  }
  for (const auto& d : dirs) {
    const Outcome o = RunOne(d, options);
    const std::string name = d.filename().string();
    switch (o.kind) {
      case Outcome::kPass:
        out << "PASS " << name << "\n";
        ++sum.passed;
        break;
      case Outcome::kFail:
        out << "FAIL " << name << ": " << o.reason << "\n";
        ++sum.failed;
        break;
      case Outcome::kSkip:
        out << "SKIP " << name << ": " << o.reason << "\n";
        ++sum.skipped;
        break;
    }
  }
  out << sum.passed << " passed, " << sum.failed << " failed";
  if (sum.skipped) out << ", " << sum.skipped << " skipped";
  out << "\n";
  return sum;
}

}  // namespace nibble
