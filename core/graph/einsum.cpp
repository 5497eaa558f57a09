#include "graph/einsum.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace gpusim {

EinsumEquation parse_einsum_equation(const std::string& equation) {
  std::string eq;
  for (size_t p = 0; p < equation.size(); ++p) {
    if (equation.compare(p, 3, "...") == 0) {
      eq += '.';
      p += 2;
    } else if (equation[p] != ' ') {
      eq += equation[p];
    }
  }
  EinsumEquation e;
  const auto arrow = eq.find("->");
  e.inputs.emplace_back();
  for (char ch : eq.substr(0, arrow)) {
    if (ch == ',') {
      e.inputs.emplace_back();
    } else {
      e.inputs.back().push_back(ch);
    }
  }
  if (arrow != std::string::npos) {
    e.output = eq.substr(arrow + 2);
    e.explicit_output = true;
    return e;
  }
  std::map<char, int> count;
  bool ell = false;
  for (const auto& in : e.inputs) {
    for (char ch : in) {
      if (ch == '.') {
        ell = true;
      } else {
        ++count[ch];
      }
    }
  }
  if (ell) e.output = ".";
  for (auto [ch, k] : count) {
    if (k == 1) e.output += ch;
  }
  return e;
}

Result<EinsumLabels> einsum_labels(const EinsumEquation& e, const std::vector<Shape>& shapes) {
  if (e.inputs.size() != shapes.size()) {
    return make_error(ErrorCode::kInvalidModel, fmt::format("the equation names {} operands, the node has {} inputs",
                                                            e.inputs.size(), shapes.size()));
  }
  EinsumLabels l;
  std::vector<size_t> er(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string& term = e.inputs[i];
    const bool has_ell = term.find('.') != std::string::npos;
    const size_t letters = term.size() - (has_ell ? 1 : 0), rank = shapes[i].size();
    if (rank < letters || (!has_ell && rank != letters)) {
      return make_error(ErrorCode::kInvalidModel, fmt::format("operand {} does not fit \"{}\"", i, term));
    }
    er[i] = rank - letters;
    l.ellipsis_rank = std::max(l.ellipsis_rank, er[i]);
  }
  auto expand = [&](const std::string& term, size_t ell) {
    std::vector<int> out;
    for (char ch : term) {
      if (ch != '.') out.push_back(static_cast<unsigned char>(ch) & 127);
      for (size_t t = 0; ch == '.' && t < ell; ++t) out.push_back(static_cast<int>(128 + l.ellipsis_rank - ell + t));
    }
    return out;
  };
  for (size_t i = 0; i < shapes.size(); ++i) l.inputs.push_back(expand(e.inputs[i], er[i]));
  l.output = expand(e.output, l.ellipsis_rank);
  return l;
}

}  // namespace gpusim
