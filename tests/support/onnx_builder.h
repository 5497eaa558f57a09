// Test support: builds small ONNX models in memory and writes them to temporary files, so tests
// state the exact graph they import. Uses ONNX's protobuf types directly (tests only).
//
//   OnnxBuilder b(17);
//   b.input("x", onnx::TensorProto::FLOAT, {1, 3, 8, 8});
//   b.initializer("w", onnx::TensorProto::FLOAT, {4, 3, 3, 3});
//   b.node("Conv", {"x", "w"}, {"y"}).ints("pads", {1, 1, 1, 1});
//   b.output("y");
//   std::string path = b.write("conv.onnx");
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace gpusim::test {

// A dim is a size or a symbolic name.
using Dim = std::variant<int64_t, std::string>;

class NodeRef {
 public:
  explicit NodeRef(onnx::NodeProto* n) : n_(n) {}
  NodeRef& i(const std::string& k, int64_t v);
  NodeRef& f(const std::string& k, float v);
  NodeRef& s(const std::string& k, const std::string& v);
  NodeRef& ints(const std::string& k, const std::vector<int64_t>& v);
  NodeRef& floats(const std::string& k, const std::vector<float>& v);
  NodeRef& tensor(const std::string& k, const onnx::TensorProto& t);
  NodeRef& graph(const std::string& k, const onnx::GraphProto& g);
  onnx::NodeProto* proto() { return n_; }

 private:
  onnx::NodeProto* n_;
};

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 17);

  void input(const std::string& name, int elem_type, const std::vector<Dim>& dims);
  void output(const std::string& name);
  // An initializer with dims only (no data), as in a shape-only model.
  void initializer(const std::string& name, int elem_type, const std::vector<int64_t>& dims);
  // An int64 initializer with data (shape constants).
  void initializer_i64(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& data);
  NodeRef node(const std::string& op, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
               const std::string& name = "");
  onnx::ModelProto& model() { return m_; }
  onnx::GraphProto& graph() { return *m_.mutable_graph(); }

  // Writes the model to a fresh file under the test temp dir; returns its path.
  std::string write(const std::string& file_name) const;

 private:
  onnx::ModelProto m_;
};

onnx::TensorProto i64_tensor(const std::vector<int64_t>& dims, const std::vector<int64_t>& data);
onnx::TensorProto f32_tensor(const std::vector<int64_t>& dims, const std::vector<float>& data);
// A directory for the test's files (created once per process).
std::string temp_dir();
// Writes raw bytes to a file in temp_dir(); returns the path.
std::string write_bytes(const std::string& file_name, const std::string& bytes);
// A whole file's bytes ("" when it cannot be read).
std::string file_bytes(const std::string& path);

// Where the ONNX project's test data is: $GPUSIM_ONNX_TESTDATA, else ../shared/onnx-testdata next to
// the source tree. Empty when absent (tests then skip, saying so).
std::string onnx_testdata_dir();
// The names of a model file's graph inputs that are not initializers, in order.
std::vector<std::string> graph_input_names(const std::string& model_path);
std::string source_dir();

}  // namespace gpusim::test
