#include "support/onnx_builder.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>

namespace gpusim::test {

NodeRef& NodeRef::i(const std::string& k, int64_t v) {
  auto* a = n_->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
  return *this;
}
NodeRef& NodeRef::f(const std::string& k, float v) {
  auto* a = n_->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
  return *this;
}
NodeRef& NodeRef::s(const std::string& k, const std::string& v) {
  auto* a = n_->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
  return *this;
}
NodeRef& NodeRef::ints(const std::string& k, const std::vector<int64_t>& v) {
  auto* a = n_->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
  return *this;
}
NodeRef& NodeRef::floats(const std::string& k, const std::vector<float>& v) {
  auto* a = n_->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
  return *this;
}
NodeRef& NodeRef::tensor(const std::string& k, const onnx::TensorProto& t) {
  auto* a = n_->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = t;
  return *this;
}
NodeRef& NodeRef::graph(const std::string& k, const onnx::GraphProto& g) {
  auto* a = n_->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
  return *this;
}

OnnxBuilder::OnnxBuilder(int64_t opset) {
  m_.set_ir_version(8);
  m_.set_producer_name("gpusim-tests");
  auto* o = m_.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m_.mutable_graph()->set_name("test");
}

void OnnxBuilder::input(const std::string& name, int elem_type, const std::vector<Dim>& dims) {
  auto* vi = graph().add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (const Dim& d : dims) {
    auto* dim = shape->add_dim();
    if (std::holds_alternative<int64_t>(d)) {
      dim->set_dim_value(std::get<int64_t>(d));
    } else if (!std::get<std::string>(d).empty()) {
      dim->set_dim_param(std::get<std::string>(d));
    }
  }
}

void OnnxBuilder::output(const std::string& name) { graph().add_output()->set_name(name); }

void OnnxBuilder::initializer(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
  auto* t = graph().add_initializer();
  t->set_name(name);
  t->set_data_type(elem_type);
  for (int64_t d : dims) t->add_dims(d);
}

void OnnxBuilder::initializer_i64(const std::string& name, const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& data) {
  auto* t = graph().add_initializer();
  *t = i64_tensor(dims, data);
  t->set_name(name);
}

NodeRef OnnxBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = graph().add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + std::to_string(graph().node_size()) : name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return NodeRef(n);
}

std::string OnnxBuilder::write(const std::string& file_name) const {
  std::string bytes;
  if (!m_.SerializeToString(&bytes)) throw std::runtime_error("serialize failed");
  return write_bytes(file_name, bytes);
}

onnx::TensorProto i64_tensor(const std::vector<int64_t>& dims, const std::vector<int64_t>& data) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t x : data) t.add_int64_data(x);
  return t;
}

onnx::TensorProto f32_tensor(const std::vector<int64_t>& dims, const std::vector<float>& data) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float x : data) t.add_float_data(x);
  return t;
}

std::string temp_dir() {
  static const std::string dir = [] {
    auto p = std::filesystem::temp_directory_path() / ("gpusim-tests-" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return dir;
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string write_bytes(const std::string& file_name, const std::string& bytes) {
  const std::string path = temp_dir() + "/" + file_name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::string source_dir() { return GPUSIM_SOURCE_DIR; }

std::vector<std::string> graph_input_names(const std::string& model_path) {
  std::ifstream f(model_path, std::ios::binary);
  onnx::ModelProto m;
  if (!m.ParseFromIstream(&f)) return {};
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto& i : m.graph().input()) {
    if (!inits.count(i.name())) names.push_back(i.name());
  }
  return names;
}

std::string onnx_testdata_dir() {
  if (const char* env = std::getenv("GPUSIM_ONNX_TESTDATA"); env && *env) {
    return std::filesystem::is_directory(env) ? std::string(env) : std::string();
  }
  const auto p = std::filesystem::path(GPUSIM_SOURCE_DIR).parent_path() / "shared" / "onnx-testdata";
  return std::filesystem::is_directory(p) ? p.string() : std::string();
}

}  // namespace gpusim::test
