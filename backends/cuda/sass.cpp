// Reading nvdisasm's SASS listing: see sass.h.
#include "sass.h"

#include <fmt/format.h>

#include <algorithm>
#include <bitset>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <vector>

#include "gpu_common.h"

namespace gpusim::backend::cuda {

namespace {

namespace fs = std::filesystem;

constexpr int kRegisters = 256;  // R0 .. R255 (RZ is R255's name and is never a value)

struct Instruction {
  std::string opcode;      // "LDG.E.U16.CONSTANT"
  std::string base;        // "LDG"
  std::string target;      // a branch's label, else ""
  std::vector<int> dests;  // registers written
  std::vector<int> srcs;   // registers read
};

bool has_modifier(const std::string& opcode, std::string_view m) {
  size_t at = 0;
  while ((at = opcode.find(m, at)) != std::string::npos) {
    const size_t end = at + m.size();
    if (at > 0 && opcode[at - 1] == '.' && (end == opcode.size() || opcode[end] == '.')) return true;
    at = end;
  }
  return false;
}

// Registers a value of this instruction's destination spans.
int dest_width(const Instruction& in) {
  const std::string& o = in.opcode;
  if (has_modifier(o, "128")) return 4;
  if (in.base == "LDSM") return has_modifier(o, "4") ? 4 : has_modifier(o, "2") ? 2 : 1;
  if (in.base.find("MMA") != std::string::npos) {
    return has_modifier(o, "F32") || has_modifier(o, "S32") ? 4 : 2;
  }
  if (has_modifier(o, "64") || has_modifier(o, "WIDE") || in.base == "CS2R" || in.base == "DADD" || in.base == "DFMA" ||
      in.base == "DMUL") {
    return 2;
  }
  return 1;
}

// Instructions whose first operand is not a register they write.
bool writes_no_register(const std::string& base) {
  static const char* kNone[] = {"ST",    "STG",  "STS",   "STL",       "STSM",  "RED",    "REDG",  "REDUX_",
                                "LDGSTS", "BAR", "BRA",   "BRX",       "JMP",   "JMX",    "EXIT",  "RET",
                                "BSSY",  "BSYNC", "WARPSYNC", "NOP",   "MEMBAR", "FENCE", "ERRBAR", "CCTL",
                                "DEPBAR", "LDGDEPBAR", "YIELD", "CALL", "BPT",  "KILL",   "SYNCS", "UTMALDG"};
  for (const char* n : kNone) {
    if (base == n) return true;
  }
  return false;
}

// The R registers named in `operand` ("desc[UR6][R8.64+0x200]" -> 8, 9; "R8.H0_H0" -> 8), with
// `width` registers for a plain register operand.
void registers_in(std::string_view operand, int width, std::vector<int>& out) {
  for (size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != 'R') continue;
    if (i > 0 && (std::isalnum(static_cast<unsigned char>(operand[i - 1])) || operand[i - 1] == '_')) continue;
    size_t j = i + 1;
    int r = 0;
    while (j < operand.size() && std::isdigit(static_cast<unsigned char>(operand[j]))) {
      if (r < kRegisters) r = r * 10 + (operand[j] - '0');  // no overflow however many digits
      ++j;
    }
    if (j == i + 1 || r >= kRegisters) continue;
    int w = width;
    if (operand.substr(j, 3) == ".64") w = 2;
    for (int k = 0; k < w && r + k < kRegisters; ++k) out.push_back(r + k);
    i = j;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// One instruction line's text after "/*0340*/" ("@!P1 LDG.E.U16 R15, desc[UR6][R8.64] ;").
Instruction parse_instruction(std::string_view text) {
  Instruction in;
  text = trim(text);
  if (!text.empty() && text.back() == ';') text.remove_suffix(1);
  text = trim(text);
  if (!text.empty() && text.front() == '@') {  // a predicate guard
    const size_t sp = text.find_first_of(" \t");
    text = sp == std::string_view::npos ? std::string_view{} : trim(text.substr(sp));
  }
  const size_t sp = text.find_first_of(" \t");
  in.opcode = std::string(text.substr(0, sp));
  in.base = in.opcode.substr(0, in.opcode.find('.'));
  std::string_view rest = sp == std::string_view::npos ? std::string_view{} : trim(text.substr(sp));
  if (const size_t l = rest.find("`("); l != std::string_view::npos) {
    const size_t r = rest.find(')', l);
    if (r != std::string_view::npos) in.target = std::string(rest.substr(l + 2, r - l - 2));
  }
  std::vector<std::string_view> operands;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= rest.size(); ++i) {
    if (i < rest.size() && (rest[i] == '[' || rest[i] == '(')) ++depth;
    if (i < rest.size() && (rest[i] == ']' || rest[i] == ')')) --depth;
    if (i == rest.size() || (rest[i] == ',' && depth == 0)) {
      if (i > start) operands.push_back(trim(rest.substr(start, i - start)));
      start = i + 1;
    }
  }
  const int width = dest_width(in);
  size_t first_src = 0;
  if (!writes_no_register(in.base) && !operands.empty()) {
    const std::string_view d = operands[0];
    if (d.size() >= 2 && d[0] == 'R' && std::isdigit(static_cast<unsigned char>(d[1]))) {
      registers_in(d, width, in.dests);
      first_src = 1;
    }
  }
  // A store's data operand is as wide as the store.
  const bool store = in.base == "ST" || in.base == "STG" || in.base == "STS" || in.base == "STL";
  for (size_t i = first_src; i < operands.size(); ++i) {
    const bool memory = operands[i].find('[') != std::string_view::npos;
    registers_in(operands[i], store && !memory ? width : 1, in.srcs);
  }
  return in;
}

bool is_global_load(const Instruction& in) { return in.base == "LDG" || in.base == "LD"; }
// A volatile load: system scope (.STRONG.SYS), as ld.volatile compiles; .STRONG.GPU is ld.global.cg.
bool is_volatile(const Instruction& in) {
  return is_global_load(in) && has_modifier(in.opcode, "STRONG") && has_modifier(in.opcode, "SYS");
}

void count(const Instruction& in, MachineCodeRange& r) {
  const std::string& b = in.base;
  ++r.instructions;
  if (b.find("MMA") != std::string::npos) ++r.matrix;
  else if (b == "LDSM") ++r.ldsm;
  else if (b == "LDGSTS") ++r.ldgsts;
  else if (b == "LDGDEPBAR" || b == "DEPBAR") ++r.async_waits;
  else if (is_global_load(in)) {
    ++r.ld_global;
    if (is_volatile(in)) ++r.volatile_loads;
    if (has_modifier(in.opcode, "STRONG") && has_modifier(in.opcode, "GPU")) ++r.l2_loads;
  } else if (b == "STG" || b == "ST") {
    ++r.st_global;
    const std::string& o = in.opcode;
    if (has_modifier(o, "128")) ++r.st_128;
    else if (has_modifier(o, "64")) ++r.st_64;
    else if (has_modifier(o, "U8") || has_modifier(o, "S8") || has_modifier(o, "U16") || has_modifier(o, "S16")) ++r.st_narrow;
    else ++r.st_32;
  } else if (b == "LDS") ++r.ld_shared;
  else if (b == "STS") ++r.st_shared;
  else if (b == "BAR" && !has_modifier(in.opcode, "ARV")) ++r.barriers;
  else if (b == "LDL" || b == "STL") ++r.local;
  else if (b == "FFMA" || b == "DFMA" || b == "FFMA2" || (b == "HFMA2" && !has_modifier(in.opcode, "MMA"))) ++r.fma;
  else if (b == "ATOM" || b == "ATOMG" || b == "RED" || b == "REDG") ++r.atomics;
}

// The counts and the loads in flight over instructions [b, e).
MachineCodeRange figures(const std::vector<Instruction>& code, size_t b, size_t e) {
  MachineCodeRange r;
  std::bitset<kRegisters> pending;
  int outstanding = 0;
  auto batch = [&] {
    if (outstanding == 0) return;
    r.loads_in_flight = std::max(r.loads_in_flight, outstanding);
    pending.reset();
    outstanding = 0;
  };
  for (size_t i = b; i < e; ++i) {
    const Instruction& in = code[i];
    count(in, r);
    bool waits = false;
    for (int s : in.srcs) waits = waits || pending.test(static_cast<size_t>(s));
    for (int d : in.dests) waits = waits || pending.test(static_cast<size_t>(d));
    if (waits) {
      ++r.load_waits;
      batch();
    }
    if (is_global_load(in) && !in.dests.empty()) {
      for (int d : in.dests) pending.set(static_cast<size_t>(d));
      ++outstanding;
    }
  }
  batch();  // still outstanding at the end: in flight across the back edge, or to the kernel's end
  return r;
}

}  // namespace

Result<MachineCodeFigures> parse_sass(std::string_view listing, std::string_view what) {
  std::vector<Instruction> code;
  std::map<std::string, size_t, std::less<>> labels;  // label -> the index of the instruction after it
  size_t at = 0;
  while (at < listing.size()) {
    size_t nl = listing.find('\n', at);
    if (nl == std::string_view::npos) nl = listing.size();
    const std::string_view line = trim(listing.substr(at, nl - at));
    at = nl + 1;
    if (line.empty()) continue;
    if (line.substr(0, 2) == "/*") {
      const size_t close = line.find("*/");
      if (close == std::string_view::npos) continue;
      const std::string_view addr = line.substr(2, close - 2);
      // "/*0340*/": an instruction's address (hex digits); other comments are not instructions.
      bool hex = !addr.empty();
      for (char c : addr) hex = hex && std::isxdigit(static_cast<unsigned char>(c));
      if (!hex) continue;
      std::string_view text = line.substr(close + 2);
      if (const size_t c = text.find("/*"); c != std::string_view::npos) text = text.substr(0, c);  // trailing encoding
      Instruction in = parse_instruction(text);
      if (!in.opcode.empty()) code.push_back(std::move(in));
    } else if (line.back() == ':' && line.find_first_of(" \t") == std::string_view::npos) {
      labels[std::string(line.substr(0, line.size() - 1))] = code.size();
    }
  }
  if (code.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} holds no SASS instruction (lines \"/*0000*/ OPCODE operands ;\" as nvdisasm "
                                  "prints them); disassemble a cubin, not PTX",
                                  what));
  }
  std::vector<MachineCodeLoop> loops;
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i].target.empty()) continue;
    const auto l = labels.find(code[i].target);
    // A branch to itself is the trap after EXIT that pads a function's text, not a loop.
    if (l != labels.end() && l->second < i) loops.push_back({l->second, i});
  }
  return machine_code_figures(
      code.size(), loops, [&](size_t b, size_t e) { return figures(code, b, e); },
      [&](size_t i) { return is_volatile(code[i]); });
}

const std::string& nvdisasm_path() {
  static const std::string found = [] {
    if (const char* env = std::getenv("GPUSIM_NVDISASM"); env != nullptr && *env != '\0') return std::string(env);
    std::vector<fs::path> after;
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      if (const char* h = std::getenv(var); h != nullptr && *h != '\0') after.push_back(fs::path(h) / "bin");
    }
    after.emplace_back("/usr/local/cuda/bin");
    // PyPI's nvidia-cuda-nvdisasm: <venv>/lib/pythonX.Y/site-packages/nvidia/cuNN/bin/nvdisasm.
    if (const char* venv = std::getenv("VIRTUAL_ENV"); venv != nullptr && *venv != '\0') {
      std::error_code ec;
      for (const auto& py : fs::directory_iterator(fs::path(venv) / "lib", ec)) {
        for (const auto& cu : fs::directory_iterator(py.path() / "site-packages" / "nvidia", ec)) {
          after.push_back(cu.path() / "bin");
        }
      }
    }
    return gpu::find_tool({"nvdisasm"}, {}, after);
  }();
  return found;
}

const std::string& nvdisasm_version() {
  static const std::string v = [] {
    const std::string& tool = nvdisasm_path();
    if (tool.empty()) return std::string();
    int status = 0;
    const std::string out = gpu::run_tool(tool, {"-V"}, std::nullopt, true, &status);
    // "... Cuda compilation tools, release 13.0, V13.0.88" -> "nvdisasm 13.0.88"
    const size_t at = out.rfind(", V");
    if (at == std::string::npos) return std::string("nvdisasm");
    const size_t end = out.find_first_of(" \r\n", at + 3);
    return "nvdisasm " + out.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
  }();
  return v;
}

Result<std::string> disassemble_cubin(std::string_view cubin, std::string_view kernel) {
  const std::string& tool = nvdisasm_path();
  if (tool.empty()) {
    return make_error(ErrorCode::kUnavailable,
                      "no nvdisasm to read the SASS with (it is not part of NVRTC): install PyPI's "
                      "nvidia-cuda-nvdisasm (tools/setup-tools-venv.sh puts it in .venv-tools) and set "
                      "GPUSIM_NVDISASM to its nvdisasm, or put a CUDA toolkit's bin folder on PATH");
  }
  int status = 0;
  // -c: the code sections only; stderr folded in, so a failure's message comes back.
  std::string text = gpu::run_tool(tool, {"-c"}, cubin, true, &status);
  if (status != 0) {
    if (text.size() > 2000) text.resize(2000);
    return make_error(ErrorCode::kDevice, fmt::format("kernel \"{}\": {} failed on its cubin (status {}): {}", kernel,
                                                      tool, status, trim(text)));
  }
  return text;
}

}  // namespace gpusim::backend::cuda
