// Figures of a kernel's machine code (issue 51): what the instructions a GPU runs do per main-loop
// iteration, read from a disassembly without a device. NVIDIA's SASS fills them (cuda/sass.h:
// nvdisasm's listing of the cubin NVRTC built), and AMD's code objects (hip/amdgcn.h: llvm-objdump's
// disassembly of what hiprtc built); the compile report keeps them with each kernel and the compile
// tier gates on them. The kernel cache does not keep them yet (codegen/compiled_figures.h holds
// registers, shared memory and spills).
//
// The main loop is the outermost loop holding the most matrix instructions, else FMAs, else global
// loads; the epilogue is everything after it. `loads_in_flight` and `load_waits` follow global
// loads through one pass of a range's text (cuda/sass.h and hip/amdgcn.h say how).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace gpusim::backend {

// Static counts over a range of a listing's instructions.
struct MachineCodeRange {
  int instructions = 0;
  int matrix = 0;        // HMMA, IMMA, DMMA, HGMMA (wgmma), UTC*MMA (tcgen05): warp- and group-level matrix ops
  int ldsm = 0;          // LDSM: ldmatrix
  int ldgsts = 0;        // LDGSTS: cp.async, global to shared without registers
  int async_waits = 0;   // LDGDEPBAR and DEPBAR: the commits and waits of cp.async stages
  int ld_global = 0;     // LDG and generic LD
  int st_global = 0;     // STG and generic ST
  int ld_shared = 0, st_shared = 0;  // LDS, STS (LDSM counted above)
  int barriers = 0;      // BAR.SYNC / BAR.RED: block-wide barriers (WARPSYNC is not one)
  int volatile_loads = 0;  // LDG/LD .STRONG.SYS: volatile loads, which the compiler neither merges nor reorders
  int l2_loads = 0;        // LDG/LD .STRONG.GPU (ld.global.cg), AMD's glc/sc loads: past L1, in flight like any other
  int local = 0;         // LDL and STL: local memory (spills, indexed arrays)
  int fma = 0;           // FFMA, HFMA2, DFMA: the SIMT path's multiply-adds
  int atomics = 0;       // ATOM, ATOMG, RED
  // Global stores by width: 8 or 16 bits, 32, 64, 128.
  int st_narrow = 0, st_32 = 0, st_64 = 0, st_128 = 0;
  int loads_in_flight = 0;  // the most global loads outstanding when one of them is first used
  int load_waits = 0;       // first uses that wait on an outstanding global load, in one pass over the text
};

struct MachineCodeFigures {
  MachineCodeRange all;
  bool has_main_loop = false;
  MachineCodeRange main_loop;   // the main loop's text (cuda/sass.h); zeros where there is no loop
  MachineCodeRange epilogue;    // the instructions after the main loop's last one
  int loops = 0;         // backward branches
  int volatile_loads_in_loops = 0;  // volatile loads inside any loop
};

// A loop of a listing: instructions `begin` to `end` (inclusive), `end` the backward branch.
struct MachineCodeLoop {
  size_t begin = 0, end = 0;
};

// The figures of a listing of `n` instructions with these loops, whichever the vendor: `range(b, e)`
// counts instructions [b, e), `is_volatile(i)` says whether instruction i is a volatile load. The
// main loop is the kind of work the kernel does most (matrix, FMA, global loads) and the outermost
// loop holding the most of it; the epilogue what follows it.
inline MachineCodeFigures machine_code_figures(size_t n, const std::vector<MachineCodeLoop>& loops,
                                               const std::function<MachineCodeRange(size_t, size_t)>& range,
                                               const std::function<bool(size_t)>& is_volatile) {
  MachineCodeFigures f;
  f.all = range(0, n);
  f.loops = static_cast<int>(loops.size());
  // Each instruction once, whichever (nested) loops hold it.
  std::vector<char> in_loop(n, 0);
  for (const MachineCodeLoop& l : loops) {
    for (size_t i = l.begin; i <= l.end && i < n; ++i) in_loop[i] = 1;
  }
  for (size_t i = 0; i < n; ++i) {
    if (in_loop[i] && is_volatile(i)) ++f.volatile_loads_in_loops;
  }
  std::vector<MachineCodeRange> per(loops.size());
  for (size_t i = 0; i < loops.size(); ++i) per[i] = range(loops[i].begin, loops[i].end + 1);
  auto metric = [](const MachineCodeRange& r, int kind) { return kind == 0 ? r.matrix : kind == 1 ? r.fma : r.ld_global; };
  for (int kind = 0; kind < 3 && !f.has_main_loop; ++kind) {
    int best = 0;
    for (const MachineCodeRange& r : per) best = std::max(best, metric(r, kind));
    if (best == 0) continue;
    size_t pick = loops.size();
    for (size_t i = 0; i < loops.size(); ++i) {
      if (metric(per[i], kind) != best) continue;
      if (pick == loops.size() || loops[i].end - loops[i].begin > loops[pick].end - loops[pick].begin) pick = i;
    }
    f.has_main_loop = true;
    f.main_loop = per[pick];
    f.epilogue = range(loops[pick].end + 1, n);
  }
  return f;
}

}  // namespace gpusim::backend
