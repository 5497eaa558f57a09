// Buffers: device-local storage buffers, mapped where the host can see them, else copied through a
// staging buffer (see vk_backend_impl.h).
#include "vk_backend_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace gpusim::backend::vulkan::detail {

int VulkanBackend::find_memory_type(uint32_t type_bits, std::initializer_list<MemoryChoice> choices) const {
  for (const MemoryChoice& c : choices) {
    for (uint32_t i = 0; i < caps_.memory.memoryTypeCount; ++i) {
      const VkMemoryPropertyFlags flags = caps_.memory.memoryTypes[i].propertyFlags;
      if ((type_bits & (1u << i)) && (flags & c.want) == c.want && (flags & c.avoid) == 0) return static_cast<int>(i);
    }
  }
  return -1;
}

Result<VulkanBackend::Buf> VulkanBackend::create_buffer(uint64_t bytes, VkBufferUsageFlags usage,
                                                        std::initializer_list<MemoryChoice> choices) {
  Buf b;
  b.bytes = bytes;
  // At least 4 bytes (a zero-sized VkBuffer is invalid), whole 32-bit words for std430 arrays.
  b.capacity = std::max<uint64_t>(4, (bytes + 3) & ~uint64_t{3});
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = b.capacity;
  bci.usage = usage;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = d_.vkCreateBuffer(device_, &bci, nullptr, &b.buffer);
  if (r != VK_SUCCESS) return vk_error(fmt::format("vkCreateBuffer of {} bytes", bytes), r);
  VkMemoryRequirements req{};
  d_.vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  const int type = find_memory_type(req.memoryTypeBits, choices);
  if (type < 0) {
    d_.vkDestroyBuffer(device_, b.buffer, nullptr);
    return make_error(ErrorCode::kDevice, fmt::format("{}: no memory type can hold a {}-byte buffer", who(), bytes));
  }
  VkMemoryAllocateInfo mai{};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = static_cast<uint32_t>(type);
  r = d_.vkAllocateMemory(device_, &mai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    d_.vkDestroyBuffer(device_, b.buffer, nullptr);
    const uint32_t heap = caps_.memory.memoryTypes[type].heapIndex;
    return make_error(ErrorCode::kDevice,
                      fmt::format("{}: allocating {} bytes failed: {} (memory heap {} holds {} bytes); use smaller "
                                  "inputs or a device with more memory",
                                  who(), bytes, result_name(r), heap, caps_.memory.memoryHeaps[heap].size));
  }
  const VkMemoryPropertyFlags flags = caps_.memory.memoryTypes[type].propertyFlags;
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if ((r = d_.vkBindBufferMemory(device_, b.buffer, b.memory, 0)) != VK_SUCCESS) {
    destroy_buffer(b);
    return vk_error("vkBindBufferMemory", r);
  }
  if ((flags & host) == host) {
    void* p = nullptr;
    if ((r = d_.vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &p)) != VK_SUCCESS) {
      destroy_buffer(b);
      return vk_error("vkMapMemory", r);
    }
    b.mapped = static_cast<char*>(p);
  }
  return b;
}

void VulkanBackend::destroy_buffer(Buf& b) {
  if (b.mapped != nullptr) d_.vkUnmapMemory(device_, b.memory);
  if (b.buffer != VK_NULL_HANDLE) d_.vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory != VK_NULL_HANDLE) d_.vkFreeMemory(device_, b.memory, nullptr);
  b = Buf{};
}

Result<Buffer> VulkanBackend::allocate(uint64_t bytes) {
  if (auto s = alive(); !s) return s.error();
  constexpr VkMemoryPropertyFlags kLocal = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  constexpr VkMemoryPropertyFlags kHost = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkBufferUsageFlags usage =
      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  // Shared-memory devices (CPU, integrated) have device-local memory the host can map: use it
  // directly. A discrete GPU's host-visible device-local memory is the small, uncached BAR window,
  // so there device-local memory without host access comes first and copies are staged.
  const auto type = caps_.props.deviceType;
  const bool unified = type == VK_PHYSICAL_DEVICE_TYPE_CPU || type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  Result<Buf> b = unified ? create_buffer(bytes, usage, {{kLocal | kHost, 0}, {kLocal, 0}, {kHost, 0}, {0, 0}})
                          : create_buffer(bytes, usage, {{kLocal, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT}, {kLocal, 0}, {0, 0}});
  if (!b) return b.error();
  const uint64_t id = next_buffer_id_++;
  buffers_.emplace(id, *b);
  return Buffer{id, bytes};
}

Result<const VulkanBackend::Buf*> VulkanBackend::find(const Buffer& b, uint64_t bytes, uint64_t offset,
                                                      const char* op) const {
  auto it = buffers_.find(b.id);
  if (it == buffers_.end()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: {} of buffer {}: no such buffer (released, or from another backend)", who(),
                                  op, b.id));
  }
  const uint64_t size = it->second.bytes;
  if (bytes > size || offset > size - bytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: {} of {} bytes at offset {} overruns buffer {} of {} bytes", who(), op, bytes,
                                  offset, b.id, size));
  }
  return &it->second;
}

Status VulkanBackend::ensure_staging(uint64_t bytes) {
  if (staging_.capacity >= bytes) return Ok{};
  // Host writes then device reads (upload), or the reverse: cached memory suits both on most drivers.
  destroy_buffer(staging_);
  uint64_t cap = 1 << 20;
  while (cap < bytes) cap *= 2;
  constexpr VkMemoryPropertyFlags kHost = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  auto b = create_buffer(std::min(cap, kMaxStagingBytes),
                         VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                         {{kHost | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0}, {kHost, 0}});
  if (!b) return b.error();
  staging_ = *b;
  if (staging_.mapped == nullptr) {
    destroy_buffer(staging_);
    return make_error(ErrorCode::kDevice, fmt::format("{}: no host-visible coherent memory for staging", who()));
  }
  return Ok{};
}

Status VulkanBackend::upload(const Buffer& b, const void* src, uint64_t bytes, uint64_t offset) {
  if (auto s = alive(); !s) return s;
  auto buf = find(b, bytes, offset, "upload");
  if (!buf) return buf.error();
  if (bytes == 0) return Ok{};
  // Launches already enqueued must read the old contents.
  if (auto s = synchronize(); !s) return s;
  const Buf& dst = **buf;
  if (dst.mapped != nullptr) {
    std::memcpy(dst.mapped + offset, src, bytes);  // coherent; the next submit makes it visible
    return Ok{};
  }
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(bytes - done, kMaxStagingBytes);
    if (auto s = ensure_staging(n); !s) return s;
    std::memcpy(staging_.mapped, static_cast<const char*>(src) + done, n);
    if (auto s = begin_batch(); !s) return s;
    VkBufferCopy region{0, offset + done, n};
    d_.vkCmdCopyBuffer(cmd_, staging_.buffer, dst.buffer, 1, &region);
    if (auto s = synchronize(); !s) return s;
    done += n;
  }
  return Ok{};
}

Status VulkanBackend::download(const Buffer& b, void* dst, uint64_t bytes, uint64_t offset) {
  if (auto s = alive(); !s) return s;
  auto buf = find(b, bytes, offset, "download");
  if (!buf) return buf.error();
  if (bytes == 0) return Ok{};
  if (auto s = synchronize(); !s) return s;  // the enqueued launches' results
  const Buf& src = **buf;
  if (src.mapped != nullptr) {
    std::memcpy(dst, src.mapped + offset, bytes);
    return Ok{};
  }
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(bytes - done, kMaxStagingBytes);
    if (auto s = ensure_staging(n); !s) return s;
    if (auto s = begin_batch(); !s) return s;
    VkBufferCopy region{offset + done, 0, n};
    d_.vkCmdCopyBuffer(cmd_, src.buffer, staging_.buffer, 1, &region);
    if (auto s = synchronize(); !s) return s;
    std::memcpy(static_cast<char*>(dst) + done, staging_.mapped, n);
    done += n;
  }
  return Ok{};
}

void VulkanBackend::release(const Buffer& b) {
  auto it = buffers_.find(b.id);
  if (it == buffers_.end()) return;
  // A recorded launch may still use it: destroy it after the batch.
  if (recording_) {
    release_after_batch_.push_back(it->second);
  } else {
    destroy_buffer(it->second);
  }
  buffers_.erase(it);
}

}  // namespace gpusim::backend::vulkan::detail
