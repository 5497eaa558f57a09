#include "common.h"


namespace gpusim::cli {

Result<DType> parse_dtype(const std::string& s) {
  if (s == "fp32") return DType::kFloat32;
  if (s == "fp16") return DType::kFloat16;
  if (s == "bf16") return DType::kBFloat16;
  return make_error(ErrorCode::kInvalidArgument,
                    "--dtype \"" + s + "\" is not supported; expected fp32, fp16 or bf16");
}

int exit_code(const Error& e) { return e.code == ErrorCode::kInvalidArgument ? 2 : 1; }

}  // namespace gpusim::cli
