// The Dojo's two tables, column by column (dojo.h: kernel_columns, plan_columns). The writer in
// dojo.cpp appends values in exactly this order; a test checks every row has one per column.
#include "gpusim/dojo.h"

namespace gpusim::dojo {

namespace {

// Columns both tables start with: which task and plan a row belongs to.
#define GPUSIM_DOJO_KEY_COLUMNS                                                                                     \
  {"task", "int", "", "task index (graph variant x GPU x constraint), stable for a configuration"},                \
      {"graph", "string", "", "graph variant id: the model's file stem, then [dim=value,...] for a dim set"},      \
      {"graph_family", "string", "", "the model's file stem: split by it to test on unseen graphs"},               \
      {"gpu", "string", "", "GPU id: a profile name, or <base>-v<k> for a virtual GPU (gpus/<id>.yaml)"},          \
      {"gpu_family", "string", "", "the base profile: split by it to test on unseen GPUs"},                         \
      {"virtual_gpu", "bool", "", "the GPU was sampled around its base profile"},                                   \
      {"objective", "string", "", "what the search's best plan minimises: latency, throughput, energy or memory"}, \
      {"memory_fraction", "float", "", "memory budget as a fraction of the GPU's memory"},                          \
      {"power_fraction", "float", "", "power cap as a fraction of the GPU's TDP (the sustained clock follows)"},    \
      {"plan", "int", "", "plan index within the task: 0 eager, 1 the search's best, 2.. random"},                \
      {"plan_kind", "string", "", "eager, best or random"}

const std::vector<Column> kKernel = {
    GPUSIM_DOJO_KEY_COLUMNS,
    {"kernel", "int", "", "kernel index within the plan, in execution order"},
    {"op_types", "string", "", "the fused ops' types, '+'-joined, anchor first (\"Conv+Relu\")"},
    {"ops", "int", "", "ops fused into the kernel"},
    {"class", "string", "", "kernel class: gemm, conv, attention, elementwise, reduction, normalization, data-movement"},
    {"dtype", "string", "", "element type it computes in"},
    {"batch", "int", "", "GEMM view: batch (heads folded in for attention)"},
    {"m", "int", "", "GEMM view: rows of the output (queries for attention)"},
    {"n", "int", "", "GEMM view: columns of the output"},
    {"k", "int", "", "GEMM view: reduction length"},
    {"window", "int", "", "convolution window size (taps)"},
    {"kv_seq", "int", "", "attention: keys"},
    {"head_dim", "int", "", "attention: query/key head dim"},
    {"elements", "int", "", "output elements"},
    {"rows", "int", "", "reductions and normalizations: independent rows"},
    {"row_elements", "int", "", "reductions and normalizations: elements a row"},
    {"fma_flops", "int", "FLOP", "multiply-add FLOPs (2 per MAC), epilogue included"},
    {"transcendental_flops", "int", "FLOP", "exp, log, tanh, sqrt, division ..."},
    {"compare_flops", "int", "FLOP", "comparisons and selects"},
    {"bytes_read", "int", "B", "compulsory bytes read (tensors crossing the kernel boundary)"},
    {"bytes_written", "int", "B", "compulsory bytes written"},
    {"block_m", "int", "", "tile: block rows (GEMM-like and attention kernels; 0 otherwise)"},
    {"block_n", "int", "", "tile: block columns"},
    {"block_k", "int", "", "tile: K step"},
    {"threads", "int", "", "tile: threads a block"},
    {"stages", "int", "", "tile: pipeline stages"},
    {"split_k", "int", "", "tile: K slices"},
    {"vector_width", "int", "", "tile: elements a load"},
    {"items_per_thread", "int", "", "tile: items a thread"},
    {"units", "int", "", "GPU: SMs / CUs"},
    {"clock_mhz", "float", "MHz", "GPU: the clock it sustains under load at this power cap"},
    {"fp32_tflops", "float", "TFLOP/s", "GPU: vector fp32 peak at boost clock"},
    {"matrix_tflops", "float", "TFLOP/s", "GPU: matrix-unit peak for the dtype (fp32 accumulate), 0 without"},
    {"dram_gbps", "float", "GB/s", "GPU: DRAM bandwidth (datasheet)"},
    {"dram_gb", "float", "GB", "GPU: DRAM size"},
    {"l2_mb", "float", "MB", "GPU: L2 size"},
    {"l2_gbps", "float", "GB/s", "GPU: L2 bandwidth"},
    {"smem_per_unit_kb", "float", "KiB", "GPU: shared memory a unit"},
    {"tdp_w", "float", "W", "GPU: power limit after the cap"},
    {"predicted_us", "float", "us", "label: the simulator's kernel time"},
    {"bound", "string", "", "label: what limits it: compute, dram, l2 or latency"},
    {"compute_us", "float", "us", "label component: math at the rate the dtype and tile get"},
    {"dram_us", "float", "us", "label component: DRAM traffic"},
    {"l2_us", "float", "us", "label component: L2 traffic"},
    {"latency_us", "float", "us", "label component: pipeline fill"},
    {"path_us", "float", "us", "label component: latency-bound floor of the body"},
    {"waves", "int", "", "label: waves of blocks over the units"},
    {"occupancy", "float", "", "label: resident warps / max warps a unit"},
    {"dram_bytes", "float", "B", "label: DRAM bytes after tile reuse and L2"},
    {"start_us", "float", "us", "label: start on the plan's timeline"},
    {"measured_us", "float", "us", "label: measured time of this kernel and tile on this GPU from the store; empty when none"},
};

const std::vector<Column> kPlan = {
    GPUSIM_DOJO_KEY_COLUMNS,
    {"kernels", "int", "", "kernels launched"},
    {"fused_kernels", "int", "", "kernels running more than one op"},
    {"offloaded", "int", "", "weights kept in host memory to fit the memory budget"},
    {"total_us", "float", "us", "label: first copy in to last copy out"},
    {"kernels_us", "float", "us", "label: sum of kernel times"},
    {"launch_bound_us", "float", "us", "label: time the GPU waited for launches"},
    {"peak_memory_bytes", "int", "B", "label: weights and live activations at the worst point"},
    {"fits", "bool", "", "label: peak memory within the memory budget"},
    {"energy_j", "float", "J", "label: energy of one run"},
    {"objective_value", "float", "", "label: the task's objective for this plan, lower is better (throughput: -samples/s)"},
    {"measured_kernels", "int", "", "kernels with a measured time in the store"},
};

#undef GPUSIM_DOJO_KEY_COLUMNS

}  // namespace

const std::vector<Column>& kernel_columns() { return kKernel; }
const std::vector<Column>& plan_columns() { return kPlan; }

}  // namespace gpusim::dojo
