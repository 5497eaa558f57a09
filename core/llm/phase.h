// Inside core/llm: what the llama.cpp generation (generation.cpp) and an ONNX decoder's
// (decoder.cpp) share about a phase.
#pragma once

#include <map>
#include <string>

#include "gpusim/llm.h"

namespace gpusim {

// Sets the phase's bound shares (its kernel time per bound in `bound_us`, over ph.kernels_us),
// its bound (the largest share, or "launch" where the GPU waited for launches longer than that
// bound kept it busy) and its tokens/s, from ph.kernels_us, launch_us, time_us and tokens.
void close_phase(GenerationPhase& ph, const std::map<std::string, double>& bound_us);

}  // namespace gpusim
