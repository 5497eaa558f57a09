// Reading llvm-objdump's AMDGCN disassembly: see amdgcn.h.
#include "amdgcn.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpusim::backend::hip {

namespace {

struct Instruction {
  std::string mnemonic;  // "global_load_dwordx4"
  std::string operands;  // "v[2:5], v[2:3], off glc"
  uint64_t address = 0;
  int64_t target = -1;   // a branch's target address, else -1
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool hex_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Whether `word` is one of the space- or comma-separated words of `operands`.
bool has_word(std::string_view operands, std::string_view word) {
  size_t at = 0;
  while ((at = operands.find(word, at)) != std::string_view::npos) {
    const size_t end = at + word.size();
    const bool left = at == 0 || operands[at - 1] == ' ' || operands[at - 1] == ',';
    const bool right = end == operands.size() || operands[end] == ' ' || operands[end] == ',';
    if (left && right) return true;
    at = end;
  }
  return false;
}

bool is_global_load(const Instruction& in) {
  return (starts(in.mnemonic, "global_load") || starts(in.mnemonic, "flat_load")) && in.mnemonic.find("_lds") == std::string::npos;
}
bool bypasses_cache(const Instruction& in) {
  return is_global_load(in) && (has_word(in.operands, "glc") || has_word(in.operands, "sc0") || has_word(in.operands, "sc1"));
}

// N of "vmcnt(N)" in an s_waitcnt's operands, or -1 when it does not wait on vector memory.
int vmcnt(const Instruction& in) {
  if (in.mnemonic != "s_waitcnt" && in.mnemonic != "s_waitcnt_vmcnt") return -1;
  const size_t at = in.operands.find("vmcnt(");
  if (at == std::string::npos) return -1;
  int n = 0;
  for (size_t i = at + 6; i < in.operands.size() && std::isdigit(static_cast<unsigned char>(in.operands[i])); ++i) {
    n = std::min(n * 10 + (in.operands[i] - '0'), 1 << 20);
  }
  return n;
}

void count(const Instruction& in, MachineCodeRange& r) {
  const std::string& m = in.mnemonic;
  ++r.instructions;
  if (starts(m, "v_mfma") || starts(m, "v_smfmac") || starts(m, "v_wmma")) {
    ++r.matrix;
  } else if (is_global_load(in)) {
    ++r.ld_global;
    if (bypasses_cache(in)) ++r.l2_loads;
  } else if ((starts(m, "global_load") || starts(m, "buffer_load")) && m.find("_lds") != std::string::npos) {
    ++r.ldgsts;  // straight to LDS, no registers: the async copy's counterpart
  } else if (starts(m, "global_atomic") || starts(m, "flat_atomic") || starts(m, "buffer_atomic")) {
    ++r.atomics;
  } else if (starts(m, "global_store") || starts(m, "flat_store")) {
    ++r.st_global;
    if (m.find("dwordx4") != std::string::npos || m.find("b128") != std::string::npos) {
      ++r.st_128;
    } else if (m.find("dwordx2") != std::string::npos || m.find("dwordx3") != std::string::npos ||
               m.find("b64") != std::string::npos || m.find("b96") != std::string::npos) {
      ++r.st_64;
    } else if (m.find("byte") != std::string::npos || m.find("short") != std::string::npos ||
               m.find("b8") != std::string::npos || m.find("b16") != std::string::npos) {
      ++r.st_narrow;
    } else {
      ++r.st_32;
    }
  } else if (starts(m, "scratch_") || starts(m, "buffer_")) {
    ++r.local;
  } else if (starts(m, "ds_read") || starts(m, "ds_load")) {
    ++r.ld_shared;
  } else if (starts(m, "ds_write") || starts(m, "ds_store")) {
    ++r.st_shared;
  } else if (m == "s_barrier") {
    ++r.barriers;
  } else if (starts(m, "v_fma_") || starts(m, "v_fmac_") || starts(m, "v_mac_") || starts(m, "v_pk_fma_") ||
             starts(m, "v_dot")) {
    ++r.fma;
  }
}

// The counts and the loads in flight over instructions [b, e).
MachineCodeRange figures(const std::vector<Instruction>& code, size_t b, size_t e) {
  MachineCodeRange r;
  int outstanding = 0;
  for (size_t i = b; i < e; ++i) {
    const Instruction& in = code[i];
    count(in, r);
    if (is_global_load(in)) ++outstanding;
    const int n = vmcnt(in);
    if (n >= 0 && n < outstanding) {
      ++r.load_waits;
      r.loads_in_flight = std::max(r.loads_in_flight, outstanding);
      outstanding = n;
    }
  }
  r.loads_in_flight = std::max(r.loads_in_flight, outstanding);  // in flight across the back edge, or to the end
  return r;
}

}  // namespace

Result<MachineCodeFigures> parse_amdgcn(std::string_view listing, std::string_view what) {
  std::vector<Instruction> code;
  std::map<std::string, uint64_t, std::less<>> symbols;  // function -> its first address
  size_t at = 0;
  while (at < listing.size()) {
    size_t nl = listing.find('\n', at);
    if (nl == std::string_view::npos) nl = listing.size();
    const std::string_view raw = listing.substr(at, nl - at);
    at = nl + 1;
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    // "0000000000001800 <name>:": a function's first address.
    if (line.back() == ':' && line.find(" <") != std::string_view::npos) {
      const size_t sp = line.find(" <");
      if (hex_digits(line.substr(0, sp))) {
        symbols[std::string(line.substr(sp + 2, line.size() - sp - 4))] = std::stoull(std::string(line.substr(0, sp)), nullptr, 16);
      }
      continue;
    }
    // "s_cbranch_scc1 3603   // 0000000018A8: BF850E13 <name+0x38f8>"
    const size_t slash = line.find("//");
    if (slash == std::string_view::npos || slash == 0) continue;
    const std::string_view comment = trim(line.substr(slash + 2));
    const size_t colon = comment.find(':');
    if (colon == std::string_view::npos || !hex_digits(comment.substr(0, colon))) continue;
    const std::string_view text = trim(line.substr(0, slash));
    Instruction in;
    const size_t sp = text.find_first_of(" \t");
    in.mnemonic = std::string(text.substr(0, sp));
    if (in.mnemonic.empty() || !std::islower(static_cast<unsigned char>(in.mnemonic[0]))) continue;
    in.operands = sp == std::string_view::npos ? std::string() : std::string(trim(text.substr(sp)));
    in.address = std::stoull(std::string(comment.substr(0, colon)), nullptr, 16);
    if (in.mnemonic == "s_branch" || starts(in.mnemonic, "s_cbranch_")) {
      // The target llvm-objdump names (<symbol+0xOFF>), else the signed 16-bit dword offset.
      const size_t lt = comment.find('<'), plus = comment.rfind("+0x"), gt = comment.rfind('>');
      if (lt != std::string_view::npos && plus != std::string_view::npos && gt != std::string_view::npos && lt < plus &&
          plus < gt && symbols.count(comment.substr(lt + 1, plus - lt - 1)) > 0 && hex_digits(comment.substr(plus + 3, gt - plus - 3))) {
        const auto s = symbols.find(comment.substr(lt + 1, plus - lt - 1));
        in.target = static_cast<int64_t>(s->second + std::stoull(std::string(comment.substr(plus + 3, gt - plus - 3)), nullptr, 16));
      } else if (!in.operands.empty() && std::isdigit(static_cast<unsigned char>(in.operands[0]))) {
        const long v = std::strtol(in.operands.c_str(), nullptr, 10);
        const int64_t offset = v >= 32768 ? v - 65536 : v;
        in.target = static_cast<int64_t>(in.address) + 4 + 4 * offset;
      }
    }
    code.push_back(std::move(in));
  }
  if (code.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} holds no AMDGCN instruction (lines \"mnemonic operands // ADDRESS: encoding\" as "
                                  "llvm-objdump disassembles a code object for its gfx architecture)",
                                  what));
  }
  std::map<uint64_t, size_t> index;
  for (size_t i = 0; i < code.size(); ++i) index.emplace(code[i].address, i);
  std::vector<MachineCodeLoop> loops;
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i].target < 0) continue;
    const auto t = index.find(static_cast<uint64_t>(code[i].target));
    if (t != index.end() && t->second < i) loops.push_back({t->second, i});
  }
  return machine_code_figures(
      code.size(), loops, [&](size_t b, size_t e) { return figures(code, b, e); },
      [](size_t) { return false; });
}

}  // namespace gpusim::backend::hip
