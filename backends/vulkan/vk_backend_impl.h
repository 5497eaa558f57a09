// The Vulkan backend's device object, shared by vulkan_backend.cpp (setup, compile), vk_memory.cpp
// (buffers and copies) and vk_commands.cpp (batches, launches, timers). Internal to backends/vulkan;
// the public face is vulkan_backend.h.
//
// Work is batched: launches and copies are recorded into one command buffer, which synchronize()
// submits and waits for with a fence. Every batch starts with a barrier that makes the previous
// batches' writes visible to this one and ends with one that makes its writes visible to the host
// (mapped downloads); launches within a batch are separated by compute->compute barriers. A batch
// is flushed after kMaxBatchLaunches launches, which bounds the descriptor sets it holds.
//
// Descriptors: one set per launch, allocated from pools that are all reset after each batch; when
// the current pool runs out the next one is used (and created the first time), so the pools grow
// to what the largest batch needed. Plain pools rather than VK_KHR_push_descriptor: every driver
// has them.
//
// Timers: a timed launch writes a timestamp (stage COMPUTE_SHADER: after earlier dispatches
// finish) before and after its dispatch into a pair of queries; query pools of kSlotsPerQueryPool
// pairs are added as slots are used and reused after read_timers(). Without timestamps on the
// queue, each timed launch is submitted alone and timed on the host.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend.h"
#include "spirv_figures.h"
#include "vk_caps.h"
#include "vk_loader.h"

namespace gpusim::backend::vulkan::detail {

inline constexpr uint32_t kSetsPerPool = 256;
inline constexpr uint32_t kDescriptorsPerSet = 8;  // a pool's sizing guess; larger kernels get larger pools
inline constexpr uint32_t kSlotsPerQueryPool = 256;
inline constexpr int kMaxBatchLaunches = 4096;
inline constexpr uint64_t kMaxStagingBytes = uint64_t{64} << 20;

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Memory property sets, tried in order: the first memory type with all of `want` and none of
// `avoid` wins.
struct MemoryChoice {
  VkMemoryPropertyFlags want;
  VkMemoryPropertyFlags avoid;
};

class VulkanBackend final : public Backend {
 public:
  VulkanBackend(std::unique_ptr<Instance> inst, DeviceCaps caps) : inst_(std::move(inst)), caps_(std::move(caps)) {}
  VulkanBackend(const VulkanBackend&) = delete;
  VulkanBackend& operator=(const VulkanBackend&) = delete;
  ~VulkanBackend() override;

  Status init();

  const DeviceInfo& info() const override { return caps_.info; }
  Result<Buffer> allocate(uint64_t bytes) override;
  Status upload(const Buffer& b, const void* src, uint64_t bytes, uint64_t offset) override;
  Status download(const Buffer& b, void* dst, uint64_t bytes, uint64_t offset) override;
  void release(const Buffer& b) override;
  Result<KernelHandle> compile(const KernelSource& src) override;
  Result<int> launch(KernelHandle k, std::array<uint32_t, 3> groups, std::span<const Buffer> args,
                     bool timed) override;
  Status synchronize() override;
  Result<std::vector<double>> read_timers() override;
  CompileStats compile_stats() const override { return stats_; }
  void prepare(std::span<const KernelSource> sources, int threads) override;

 private:
  struct Kernel {
    std::string name;
    uint32_t buffers = 0;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
  };
  struct Buf {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    char* mapped = nullptr;  // persistently mapped (host-visible, coherent memory), else null
    uint64_t bytes = 0;      // as asked for (the VkBuffer may be larger)
    uint64_t capacity = 0;   // the VkBuffer's size
  };

  std::string who() const { return fmt::format("Vulkan device {} ({})", caps_.info.index, caps_.info.name); }
  Error vk_error(const std::string& what, VkResult r);
  Status alive() const;
  Error fail(const std::string& what, VkResult r);  // a failure that leaves the queue unusable
  int find_memory_type(uint32_t type_bits, std::initializer_list<MemoryChoice> choices) const;
  Result<Buf> create_buffer(uint64_t bytes, VkBufferUsageFlags usage, std::initializer_list<MemoryChoice> choices);
  void destroy_buffer(Buf& b);
  Result<const Buf*> find(const Buffer& b, uint64_t bytes, uint64_t offset, const char* op) const;
  Status ensure_staging(uint64_t bytes);
  Status begin_batch();
  Result<VkDescriptorSet> allocate_set(const Kernel& k);
  void barrier(VkPipelineStageFlags src_stage, VkAccessFlags src_access, VkPipelineStageFlags dst_stage,
               VkAccessFlags dst_access);
  void destroy_kernel(Kernel& k);
  // The kernel's SPIR-V: from the on-disk kernel cache when `use_cache` and an earlier run compiled
  // the same source for the same shaderc target (then *from_disk is set), else compiled by shaderc
  // and stored there.
  Result<std::vector<uint32_t>> spirv_for(const KernelSource& src, uint64_t hash, bool use_cache, bool* from_disk);

  // Declared first, so destroyed last: the device is destroyed in ~VulkanBackend, before the
  // instance and the loader library go.
  std::unique_ptr<Instance> inst_;
  DeviceCaps caps_;
  DeviceFns d_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool recording_ = false;
  int batch_launches_ = 0;
  bool host_timed_ = false;
  std::string lost_;  // why the backend can no longer run anything ("" while it can)

  std::optional<GlslCompiler> glsl_;  // its target() is part of the disk cache's key
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  std::string disk_cache_path_;
  bool pipeline_cache_dirty_ = false;
  std::vector<Kernel> kernels_;
  std::unordered_map<uint64_t, KernelHandle> by_hash_;
  // SPIR-V that prepare() compiled (or read from the disk cache: true) ahead, by source hash;
  // compile() takes it from here.
  std::unordered_map<uint64_t, std::pair<std::vector<uint32_t>, bool>> prepared_;
  CompileStats stats_;

  std::unordered_map<uint64_t, Buf> buffers_;
  uint64_t next_buffer_id_ = 1;
  std::vector<Buf> release_after_batch_;  // released while a batch that may use them is pending
  Buf staging_;

  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t pool_cursor_ = 0;
  std::vector<VkQueryPool> query_pools_;
  uint32_t timed_slots_ = 0;
  std::vector<double> host_times_us_;
};

}  // namespace gpusim::backend::vulkan::detail
