// The compiled code as ground truth (issue 51): what a generated kernel's SASS, the machine code an
// NVIDIA GPU runs, does per main-loop iteration, read from nvdisasm's listing of the cubin NVRTC
// built, without a device. PTX is not what runs: wmma's loads only become ldmatrix (LDSM) in
// ptxas, and whether a gather keeps several loads in flight is decided by its scheduler, so these
// figures come from the SASS.
//
// The listing is read as straight-line text with its branches: a backward branch to a label makes
// a loop (its first to its last instruction). The main loop is the outermost loop holding the most
// matrix instructions (HMMA, IMMA, HGMMA, ...), else the most FMAs, else the most global loads;
// the epilogue is everything after it. For each range the parser counts the instruction kinds and
// follows the registers of global loads through one pass of the text: a load's result first read
// (or overwritten) by a later instruction is a wait on memory, and the loads issued since the
// previous wait were in flight together. `loads_in_flight` is the largest such batch (static: one
// pass over the text, inner loops once), `load_waits` the number of waits in one pass. Loads still
// outstanding at the end of a loop's text are in flight across its back edge (a software
// pipeline) and count as a batch.
//
// nvdisasm is not part of NVRTC: $GPUSIM_NVDISASM names one; else it is looked for on PATH, in
// $CUDA_HOME/bin and /usr/local/cuda/bin, and in the Python environment of $VIRTUAL_ENV (PyPI's
// nvidia-cuda-nvdisasm, which tools/setup-tools-venv.sh installs into .venv-tools).
//
// Usage:
//   auto listing = gpusim::backend::cuda::disassemble_cubin(cubin, "gemm_mm");
//   auto f = gpusim::backend::cuda::parse_sass(*listing);
//   f->main_loop.matrix, f->main_loop.loads_in_flight, f->epilogue.barriers ...
#pragma once

#include <string>
#include <string_view>

#include "gpusim/result.h"
#include "machine_code.h"

namespace gpusim::backend::cuda {

// Reads nvdisasm's listing (one cubin; every function in it). kInvalidArgument naming `what` when it
// holds no instruction.
Result<MachineCodeFigures> parse_sass(std::string_view listing, std::string_view what = "the listing");

// nvdisasm's path (see above), or "" when none is installed.
const std::string& nvdisasm_path();
// "nvdisasm (CUDA 13.5)" or similar: the tool and its version, for reports; "" when none.
const std::string& nvdisasm_version();

// nvdisasm's listing of `cubin`: kUnavailable (naming the PyPI package and $GPUSIM_NVDISASM) when
// no nvdisasm is installed; kDevice naming `kernel` when it fails on the cubin.
Result<std::string> disassemble_cubin(std::string_view cubin, std::string_view kernel);

}  // namespace gpusim::backend::cuda
