#include "common.h"


namespace gpusim::cli {

Result<DType> parse_dtype(const std::string& s) {
  if (auto d = float_dtype_from_name(s)) return *d;
  return make_error(ErrorCode::kInvalidArgument,
                    "--dtype \"" + s + "\" is not supported; expected fp32, fp16 or bf16");
}

int exit_code(const Error& e) { return e.code == ErrorCode::kInvalidArgument ? 2 : 1; }

}  // namespace gpusim::cli
