// Batches, launches and timers (see vk_backend_impl.h).
#include "vk_backend_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace gpusim::backend::vulkan::detail {

void VulkanBackend::barrier(VkPipelineStageFlags src_stage, VkAccessFlags src_access, VkPipelineStageFlags dst_stage,
                            VkAccessFlags dst_access) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  d_.vkCmdPipelineBarrier(cmd_, src_stage, dst_stage, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

Status VulkanBackend::begin_batch() {
  if (recording_) return Ok{};
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (VkResult r = d_.vkBeginCommandBuffer(cmd_, &bi); r != VK_SUCCESS) return fail("vkBeginCommandBuffer", r);
  recording_ = true;
  // Earlier batches' shader and copy writes -> this batch's shaders and copies.
  constexpr VkPipelineStageFlags kStages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  barrier(kStages, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, kStages,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
              VK_ACCESS_TRANSFER_WRITE_BIT);
  return Ok{};
}

Status VulkanBackend::synchronize() {
  if (auto s = alive(); !s) return s;
  if (!recording_) return Ok{};
  // This batch's writes -> host reads of mapped memory after the fence.
  barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
  recording_ = false;
  VkResult r = d_.vkEndCommandBuffer(cmd_);
  if (r != VK_SUCCESS) return fail("vkEndCommandBuffer", r);
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  if ((r = d_.vkQueueSubmit(queue_, 1, &si, fence_)) != VK_SUCCESS) return fail("vkQueueSubmit", r);
  if ((r = d_.vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX)) != VK_SUCCESS) {
    return fail("vkWaitForFences", r);
  }
  if ((r = d_.vkResetFences(device_, 1, &fence_)) != VK_SUCCESS) return fail("vkResetFences", r);
  if ((r = d_.vkResetCommandPool(device_, cmd_pool_, 0)) != VK_SUCCESS) return fail("vkResetCommandPool", r);
  for (VkDescriptorPool p : descriptor_pools_) d_.vkResetDescriptorPool(device_, p, 0);
  pool_cursor_ = 0;
  batch_launches_ = 0;
  for (Buf& b : release_after_batch_) destroy_buffer(b);
  release_after_batch_.clear();
  return Ok{};
}

Result<VkDescriptorSet> VulkanBackend::allocate_set(const Kernel& k) {
  for (;;) {
    bool fresh = false;
    if (pool_cursor_ == descriptor_pools_.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(k.buffers, kDescriptorsPerSet) * kSetsPerPool};
      VkDescriptorPoolCreateInfo dpci{};
      dpci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
      dpci.maxSets = kSetsPerPool;
      dpci.poolSizeCount = 1;
      dpci.pPoolSizes = &size;
      VkDescriptorPool pool = VK_NULL_HANDLE;
      if (VkResult r = d_.vkCreateDescriptorPool(device_, &dpci, nullptr, &pool); r != VK_SUCCESS) {
        return vk_error("vkCreateDescriptorPool", r);
      }
      descriptor_pools_.push_back(pool);
      fresh = true;
    }
    VkDescriptorSetAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    ai.descriptorPool = descriptor_pools_[pool_cursor_];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &k.set_layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkResult r = d_.vkAllocateDescriptorSets(device_, &ai, &set);
    if (r == VK_SUCCESS) return set;
    if ((r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) || fresh) {
      return vk_error(fmt::format("kernel \"{}\": vkAllocateDescriptorSets", k.name), r);
    }
    ++pool_cursor_;  // this pool is full for this batch: move on to the next (new) one
  }
}

Result<int> VulkanBackend::launch(KernelHandle kh, std::array<uint32_t, 3> groups, std::span<const Buffer> args,
                                  bool timed) {
  if (auto s = alive(); !s) return s.error();
  if (kh >= kernels_.size()) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: launch of kernel handle {}, which compile() did "
                                                               "not return ({} kernels compiled)",
                                                               who(), kh, kernels_.size()));
  }
  const Kernel& k = kernels_[kh];
  if (args.size() != k.buffers) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("kernel \"{}\": launched with {} buffers, it takes {}", k.name, args.size(), k.buffers));
  }
  const auto& max = caps_.info.max_groups;
  for (int i = 0; i < 3; ++i) {
    if (groups[i] > max[i]) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("kernel \"{}\": {} groups in dimension {} ({}), {} allows at most {} "
                                    "(maxComputeWorkGroupCount[{}]); use more threads per group or split the launch",
                                    k.name, groups[i], "xyz"[i], i, who(), max[i], i));
    }
  }
  std::vector<VkDescriptorBufferInfo> infos(args.size());
  const uint64_t max_range = caps_.props.limits.maxStorageBufferRange;
  for (size_t i = 0; i < args.size(); ++i) {
    auto it = buffers_.find(args[i].id);
    if (it == buffers_.end()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("kernel \"{}\": argument {} is buffer {}, which does not exist (released?)", k.name,
                                    i, args[i].id));
    }
    if (it->second.capacity > max_range) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("kernel \"{}\": argument {} has {} bytes, {} binds at most {} bytes per storage "
                                    "buffer (maxStorageBufferRange); split the tensor",
                                    k.name, i, it->second.bytes, who(), max_range));
    }
    infos[i] = VkDescriptorBufferInfo{it->second.buffer, 0, VK_WHOLE_SIZE};
  }

  if (batch_launches_ >= kMaxBatchLaunches || (timed && host_timed_)) {
    if (auto s = synchronize(); !s) return s.error();
  }
  if (auto s = begin_batch(); !s) return s.error();
  if (k.buffers > 0) {
    auto set = allocate_set(k);
    if (!set) return set.error();
    std::vector<VkWriteDescriptorSet> writes(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      writes[i] = VkWriteDescriptorSet{};
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = *set;
      writes[i].dstBinding = static_cast<uint32_t>(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    d_.vkUpdateDescriptorSets(device_, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
    d_.vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, 1, &*set, 0, nullptr);
  }
  d_.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);

  int slot = -1;
  VkQueryPool qpool = VK_NULL_HANDLE;
  uint32_t query = 0;
  if (timed && !host_timed_) {
    const uint32_t pool_index = timed_slots_ / kSlotsPerQueryPool;
    if (pool_index == query_pools_.size()) {
      VkQueryPoolCreateInfo qpci{};
      qpci.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
      qpci.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qpci.queryCount = 2 * kSlotsPerQueryPool;
      VkQueryPool pool = VK_NULL_HANDLE;
      if (VkResult r = d_.vkCreateQueryPool(device_, &qpci, nullptr, &pool); r != VK_SUCCESS) {
        return vk_error("vkCreateQueryPool", r);
      }
      query_pools_.push_back(pool);
    }
    qpool = query_pools_[pool_index];
    query = 2 * (timed_slots_ % kSlotsPerQueryPool);
    slot = static_cast<int>(timed_slots_++);
    d_.vkCmdResetQueryPool(cmd_, qpool, query, 2);
    d_.vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qpool, query);
  }
  d_.vkCmdDispatch(cmd_, groups[0], groups[1], groups[2]);
  if (qpool != VK_NULL_HANDLE) d_.vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qpool, query + 1);
  // This launch's writes -> the next launch's reads and writes.
  barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  ++batch_launches_;

  if (timed && host_timed_) {  // alone in its batch: submit, wait, and take the host's time
    const auto t0 = Clock::now();
    if (auto s = synchronize(); !s) return s.error();
    slot = static_cast<int>(host_times_us_.size());
    host_times_us_.push_back(ms_since(t0) * 1000.0);
  }
  return slot;
}

Result<std::vector<double>> VulkanBackend::read_timers() {
  if (auto s = synchronize(); !s) return s.error();
  if (host_timed_) return std::exchange(host_times_us_, {});
  std::vector<double> out;
  out.reserve(timed_slots_);
  const uint32_t bits = caps_.timestamp_valid_bits;
  const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  const double ns_per_tick = caps_.props.limits.timestampPeriod;
  std::vector<uint64_t> ticks(2 * kSlotsPerQueryPool);
  for (uint32_t first = 0; first < timed_slots_; first += kSlotsPerQueryPool) {
    const uint32_t n = std::min(kSlotsPerQueryPool, timed_slots_ - first);
    const VkResult r = d_.vkGetQueryPoolResults(device_, query_pools_[first / kSlotsPerQueryPool], 0, 2 * n,
                                                2 * n * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r != VK_SUCCESS) {
      timed_slots_ = 0;
      return vk_error("vkGetQueryPoolResults", r);
    }
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t delta = ((ticks[2 * i + 1] & mask) - (ticks[2 * i] & mask)) & mask;  // wraps at validBits
      out.push_back(static_cast<double>(delta) * ns_per_tick / 1000.0);
    }
  }
  timed_slots_ = 0;
  return out;
}

}  // namespace gpusim::backend::vulkan::detail
