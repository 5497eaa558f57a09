// The compiled code as ground truth on AMD (issue 51): what a generated kernel's machine code does
// per main-loop iteration, read from llvm-objdump's disassembly of the code object hiprtc built,
// without a device. The same figures as NVIDIA's SASS gives (machine_code.h), read the AMDGCN way:
//
//   loops           a backward s_branch / s_cbranch_* (its target: the instruction's address + 4 +
//                   4 x its signed 16-bit offset, or the <symbol+0xOFF> llvm-objdump prints)
//   loads in flight a global load's result is waited for with s_waitcnt vmcnt(N): the loads issued
//                   and not yet waited for are in flight together, and N of them stay so; the
//                   most outstanding at a wait is the range's loads in flight (stores, which also
//                   count in vmcnt before gfx10, are left out), those outstanding at a range's end
//                   are in flight across its back edge
//   matrix          v_mfma_*, v_smfmac_*, v_wmma_* (CDNA's and RDNA3's matrix instructions)
//   L2 loads        global loads with glc (gfx9, gfx10) or sc0/sc1 (gfx94x): they bypass the CU's
//                   cache, as a volatile access or a split's partial sums must (coherent in L2).
//                   AMD has no encoding of its own for volatile: whether such loads are in flight
//                   together is what the loads in flight say, so none counts as volatile
//   local           scratch_* and buffer_* (gpusim's buffers are addressed with global_*; buffer_
//                   and scratch_ are a lane's private memory: spills and indexed arrays)
//   barriers        s_barrier; shared memory ds_read / ds_load, ds_write / ds_store; FMA v_fma_*,
//                   v_fmac_*, v_mac_*, v_pk_fma_*, v_dot*
//
// Usage:
//   auto f = gpusim::backend::hip::parse_amdgcn(llvm_objdump_output);
//   f->main_loop.matrix, f->main_loop.loads_in_flight, f->epilogue.barriers ...
#pragma once

#include <string_view>

#include "gpusim/result.h"
#include "machine_code.h"

namespace gpusim::backend::hip {

// Reads `llvm-objdump -d --mcpu=gfxNNN`'s output for one code object (every function in it).
// kInvalidArgument naming `what` when it holds no instruction line ("\tmnemonic operands  // ADDR: ...").
Result<MachineCodeFigures> parse_amdgcn(std::string_view listing, std::string_view what = "the disassembly");

}  // namespace gpusim::backend::hip
