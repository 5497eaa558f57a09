// The Vulkan backend: device setup and teardown, compile(), and the entry points list_devices()
// and open() (see vulkan_backend.h; the device object is declared in vk_backend_impl.h).
#include "vulkan_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "kernel_disk_cache.h"
#include "vk_backend_impl.h"
#include "vk_disk_cache.h"
#include "base/parallel.h"

namespace gpusim::backend::vulkan {
namespace detail {

Error VulkanBackend::vk_error(const std::string& what, VkResult r) {
  if (r == VK_ERROR_DEVICE_LOST) lost_ = fmt::format("{}: the device was lost ({})", who(), what);
  return make_error(ErrorCode::kDevice, fmt::format("{}: {} failed: {}", who(), what, result_name(r)));
}

Error VulkanBackend::fail(const std::string& what, VkResult r) {
  lost_ = fmt::format("{}: {} failed: {}", who(), what, result_name(r));
  return make_error(ErrorCode::kDevice, lost_ + "; reopen the backend");
}

Status VulkanBackend::alive() const {
  if (!lost_.empty()) return make_error(ErrorCode::kDevice, lost_ + "; reopen the backend");
  return Ok{};
}

Status VulkanBackend::init() {
  const InstanceFns& f = inst_->fns;
  const bool v12 = caps_.api_version >= VK_API_VERSION_1_2;
  host_timed_ = caps_.info.timer_resolution_ns == 0;

  // Enable the optional features the device has, so kernels using them (fp16 storage and
  // arithmetic, fp64, int64) compile into valid pipelines.
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2.features.shaderFloat64 = caps_.shader_float64;
  f2.features.shaderInt64 = caps_.shader_int64;
  f2.features.shaderInt16 = caps_.shader_int16;
  VkPhysicalDeviceVulkan11Features v11f{};
  v11f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  v11f.storageBuffer16BitAccess = caps_.storage_buffer_16bit;
  v11f.uniformAndStorageBuffer16BitAccess = caps_.uniform_and_storage_buffer_16bit;
  VkPhysicalDeviceVulkan12Features v12f{};
  v12f.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  v12f.shaderFloat16 = caps_.shader_float16;
  v12f.shaderInt8 = caps_.shader_int8;
  v12f.storageBuffer8BitAccess = caps_.storage_buffer_8bit;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  storage16.storageBuffer16BitAccess = caps_.storage_buffer_16bit;
  storage16.uniformAndStorageBuffer16BitAccess = caps_.uniform_and_storage_buffer_16bit;
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{};
  f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  f16i8.shaderFloat16 = caps_.shader_float16;
  f16i8.shaderInt8 = caps_.shader_int8;
  std::vector<const char*> extensions;
  if (v12) {
    f2.pNext = &v11f;
    v11f.pNext = &v12f;
  } else {
    f2.pNext = &storage16;
    if (caps_.ext_float16_int8) {
      storage16.pNext = &f16i8;
      extensions.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    }
  }
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{};
  qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qci.queueFamilyIndex = caps_.queue_family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{};
  dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  dci.pNext = &f2;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  dci.ppEnabledExtensionNames = extensions.data();
  VkResult r = f.vkCreateDevice(caps_.physical, &dci, nullptr, &device_);
  if (r != VK_SUCCESS) {
    device_ = VK_NULL_HANDLE;
    return make_error(ErrorCode::kUnavailable, fmt::format("{}: vkCreateDevice failed: {}; update the driver ({})",
                                                           who(), result_name(r), kInstallHint));
  }
  if (auto s = load_device_fns(*inst_, device_, d_); !s) {
    // Without its own vkDestroyDevice the device cannot be released; ask the loader's.
    auto destroy = reinterpret_cast<PFN_vkDestroyDevice>(f.vkGetDeviceProcAddr(device_, "vkDestroyDevice"));
    if (destroy != nullptr) destroy(device_, nullptr);
    device_ = VK_NULL_HANDLE;
    return s;
  }
  d_.vkGetDeviceQueue(device_, caps_.queue_family, 0, &queue_);

  VkCommandPoolCreateInfo cpci{};
  cpci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  cpci.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  cpci.queueFamilyIndex = caps_.queue_family;
  if ((r = d_.vkCreateCommandPool(device_, &cpci, nullptr, &cmd_pool_)) != VK_SUCCESS) {
    return vk_error("vkCreateCommandPool", r);
  }
  VkCommandBufferAllocateInfo cbai{};
  cbai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cbai.commandPool = cmd_pool_;
  cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cbai.commandBufferCount = 1;
  if ((r = d_.vkAllocateCommandBuffers(device_, &cbai, &cmd_)) != VK_SUCCESS) {
    return vk_error("vkAllocateCommandBuffers", r);
  }
  VkFenceCreateInfo fci{};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  if ((r = d_.vkCreateFence(device_, &fci, nullptr, &fence_)) != VK_SUCCESS) return vk_error("vkCreateFence", r);

  // The pipeline cache, seeded from disk when a cache for this device and driver is there.
  disk_cache_path_ = disk_cache_path(caps_);
  std::vector<char> blob = read_disk_cache(disk_cache_path_, caps_.props);
  VkPipelineCacheCreateInfo pcci{};
  pcci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  pcci.initialDataSize = blob.size();
  pcci.pInitialData = blob.empty() ? nullptr : blob.data();
  r = d_.vkCreatePipelineCache(device_, &pcci, nullptr, &pipeline_cache_);
  if (r != VK_SUCCESS && !blob.empty()) {  // a blob the driver refuses: start empty
    pcci.initialDataSize = 0;
    pcci.pInitialData = nullptr;
    r = d_.vkCreatePipelineCache(device_, &pcci, nullptr, &pipeline_cache_);
  }
  if (r != VK_SUCCESS) return vk_error("vkCreatePipelineCache", r);

  auto cc = GlslCompiler::create(v12);
  if (!cc) return make_error(ErrorCode::kUnavailable, fmt::format("{}: {}", who(), cc.error().message));
  glsl_.emplace(std::move(*cc));
  return Ok{};
}

VulkanBackend::~VulkanBackend() {
  if (device_ != VK_NULL_HANDLE) {
    // Unsubmitted work is dropped; submitted work is waited for.
    d_.vkDeviceWaitIdle(device_);
    if (pipeline_cache_ != VK_NULL_HANDLE && pipeline_cache_dirty_ && !disk_cache_path_.empty()) {
      size_t size = 0;
      if (d_.vkGetPipelineCacheData(device_, pipeline_cache_, &size, nullptr) == VK_SUCCESS && size > 0) {
        std::vector<char> data(size);
        if (d_.vkGetPipelineCacheData(device_, pipeline_cache_, &size, data.data()) == VK_SUCCESS) {
          data.resize(size);
          write_disk_cache(disk_cache_path_, data);
        }
      }
    }
    for (Kernel& k : kernels_) destroy_kernel(k);
    for (auto& [id, b] : buffers_) destroy_buffer(b);
    for (Buf& b : release_after_batch_) destroy_buffer(b);
    destroy_buffer(staging_);
    for (VkDescriptorPool p : descriptor_pools_) d_.vkDestroyDescriptorPool(device_, p, nullptr);
    for (VkQueryPool p : query_pools_) d_.vkDestroyQueryPool(device_, p, nullptr);
    if (pipeline_cache_ != VK_NULL_HANDLE) d_.vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
    if (fence_ != VK_NULL_HANDLE) d_.vkDestroyFence(device_, fence_, nullptr);
    if (cmd_pool_ != VK_NULL_HANDLE) d_.vkDestroyCommandPool(device_, cmd_pool_, nullptr);  // frees cmd_
    d_.vkDestroyDevice(device_, nullptr);
  }
}

void VulkanBackend::destroy_kernel(Kernel& k) {
  if (k.pipeline != VK_NULL_HANDLE) d_.vkDestroyPipeline(device_, k.pipeline, nullptr);
  if (k.layout != VK_NULL_HANDLE) d_.vkDestroyPipelineLayout(device_, k.layout, nullptr);
  if (k.set_layout != VK_NULL_HANDLE) d_.vkDestroyDescriptorSetLayout(device_, k.set_layout, nullptr);
  k = Kernel{};
}

Result<std::vector<uint32_t>> VulkanBackend::spirv_for(const KernelSource& src, uint64_t hash, bool use_cache,
                                                       bool* from_disk) {
  static constexpr uint32_t kSpirvMagic = 0x07230203;
  static constexpr size_t kHeader = 20;  // SPIR-V's five header words
  const std::string file = kernel_cache_key(hash, glsl_->target(), "shaderc", "performance") + ".spv";
  *from_disk = false;
  if (use_cache) {
    // The cache checksums its files, so what loads is what a compile stored.
    auto cached = kernel_cache_load("vulkan", file);
    if (cached && cached->size() >= kHeader && cached->size() % 4 == 0) {
      std::vector<uint32_t> words(cached->size() / 4);
      std::memcpy(words.data(), cached->data(), cached->size());
      if (words[0] == kSpirvMagic) {
        *from_disk = true;
        return words;
      }
    }
  }
  auto spirv = glsl_->compile(src);
  if (!spirv) return spirv.error();
  const std::string bytes(reinterpret_cast<const char*>(spirv->data()), spirv->size() * 4);
  kernel_cache_store("vulkan", file, bytes);
  return spirv;
}

void VulkanBackend::prepare(std::span<const KernelSource> sources, int threads) {
  // What compile() would run shaderc for: GLSL sources not compiled yet, once each.
  const auto todo =
      sources_to_prepare(sources, Language::kGlsl, [&](uint64_t h) { return by_hash_.count(h) || prepared_.count(h); });
  if (todo.empty()) return;
  const auto t0 = Clock::now();
  std::vector<std::optional<std::pair<std::vector<uint32_t>, bool>>> out(todo.size());
  base::for_each_index(todo.size(), threads, [&](size_t i) {
    bool from_disk = false;
    auto spirv = spirv_for(*todo[i].second, todo[i].first, true, &from_disk);  // shaderc is thread-safe
    if (spirv) out[i] = std::make_pair(std::move(*spirv), from_disk);  // a failure is compile()'s to report
  });
  for (size_t i = 0; i < todo.size(); ++i) {
    if (out[i]) prepared_[todo[i].first] = std::move(*out[i]);
  }
  stats_.compile_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Result<KernelHandle> VulkanBackend::compile(const KernelSource& src) {
  const uint64_t hash = source_hash(src);
  if (auto it = by_hash_.find(hash); it != by_hash_.end()) {
    ++stats_.cache_hits;
    return it->second;
  }
  if (auto s = alive(); !s) return s.error();
  if (src.language != Language::kGlsl) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("kernel \"{}\": the Vulkan backend compiles GLSL compute shaders, this source is "
                                  "CUDA C++; generate it with Language::kGlsl",
                                  src.name));
  }
  if (auto s = can_run(src); !s) return s.error();
  const VkPhysicalDeviceLimits& lim = caps_.props.limits;
  for (int i = 0; i < 3; ++i) {
    if (src.block[i] > lim.maxComputeWorkGroupSize[i]) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("kernel \"{}\" on {}: local_size_{} is {}, the device allows at most {} "
                                    "(maxComputeWorkGroupSize[{}]); choose another block shape",
                                    src.name, who(), "xyz"[i], src.block[i], lim.maxComputeWorkGroupSize[i], i));
    }
  }
  const uint32_t max_buffers = std::min(lim.maxPerStageDescriptorStorageBuffers, lim.maxDescriptorSetStorageBuffers);
  if (src.buffers < 0 || static_cast<uint32_t>(src.buffers) > max_buffers) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("kernel \"{}\" on {}: {} buffer arguments, the device allows 0..{}; split the kernel",
                                  src.name, who(), src.buffers, max_buffers));
  }

  const auto t0 = Clock::now();
  bool from_disk = false;
  std::vector<uint32_t> spirv;
  if (auto it = prepared_.find(hash); it != prepared_.end()) {
    spirv = std::move(it->second.first);
    from_disk = it->second.second;
    prepared_.erase(it);
  } else {
    auto spirv_or = spirv_for(src, hash, true, &from_disk);
    if (!spirv_or) return spirv_or.error();
    spirv = std::move(*spirv_or);
  }

  Kernel k;
  k.name = src.name;
  k.buffers = static_cast<uint32_t>(src.buffers);
  auto failed = [&](const char* what, VkResult r) {
    destroy_kernel(k);
    return vk_error(fmt::format("kernel \"{}\": {}", src.name, what), r);
  };
  std::vector<VkDescriptorSetLayoutBinding> bindings(k.buffers);
  for (uint32_t i = 0; i < k.buffers; ++i) {
    bindings[i] = VkDescriptorSetLayoutBinding{};
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dslci{};
  dslci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dslci.bindingCount = k.buffers;
  dslci.pBindings = bindings.data();
  VkResult r = d_.vkCreateDescriptorSetLayout(device_, &dslci, nullptr, &k.set_layout);
  if (r != VK_SUCCESS) return failed("vkCreateDescriptorSetLayout", r);
  VkPipelineLayoutCreateInfo plci{};
  plci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &k.set_layout;
  if ((r = d_.vkCreatePipelineLayout(device_, &plci, nullptr, &k.layout)) != VK_SUCCESS) {
    return failed("vkCreatePipelineLayout", r);
  }
  VkShaderModuleCreateInfo smci{};
  smci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  smci.codeSize = spirv.size() * 4;
  smci.pCode = spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  r = d_.vkCreateShaderModule(device_, &smci, nullptr, &module);
  if (r != VK_SUCCESS && from_disk) {  // a cached module the driver refuses: compile it afresh
    auto fresh = spirv_for(src, hash, false, &from_disk);
    if (!fresh) {
      destroy_kernel(k);
      return fresh.error();
    }
    spirv = std::move(*fresh);
    smci.codeSize = spirv.size() * 4;
    smci.pCode = spirv.data();
    r = d_.vkCreateShaderModule(device_, &smci, nullptr, &module);
  }
  if (r != VK_SUCCESS) return failed("vkCreateShaderModule", r);
  VkComputePipelineCreateInfo cpci{};
  cpci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpci.stage.module = module;
  cpci.stage.pName = "main";
  cpci.layout = k.layout;
  r = d_.vkCreateComputePipelines(device_, pipeline_cache_, 1, &cpci, nullptr, &k.pipeline);
  d_.vkDestroyShaderModule(device_, module, nullptr);
  if (r != VK_SUCCESS) {
    k.pipeline = VK_NULL_HANDLE;
    return failed("vkCreateComputePipelines", r);
  }
  pipeline_cache_dirty_ = true;
  // SPIR-V from the disk cache counts as a cache hit; the driver's pipeline build is in the time.
  ++(from_disk ? stats_.cache_hits : stats_.compiled);
  stats_.compile_ms += ms_since(t0);
  const auto handle = static_cast<KernelHandle>(kernels_.size());
  kernels_.push_back(std::move(k));
  by_hash_.emplace(hash, handle);
  return handle;
}

}  // namespace detail

using detail::VulkanBackend;

Result<std::vector<DeviceInfo>> list_devices() {
  auto inst = create_instance();
  if (!inst) return inst.error();
  std::vector<DeviceInfo> out;
  for (size_t i = 0; i < (*inst)->physical_devices.size(); ++i) {
    out.push_back(query_caps(**inst, (*inst)->physical_devices[i], static_cast<int>(i)).info);
  }
  return out;
}

Result<std::unique_ptr<Backend>> open(int index) {
  auto inst = create_instance();
  if (!inst) return inst.error();
  const auto& pds = (*inst)->physical_devices;
  if (index < 0 || static_cast<size_t>(index) >= pds.size()) {
    std::string found;
    for (size_t i = 0; i < pds.size(); ++i) {
      found += fmt::format("{}{}: {}", i == 0 ? "" : ", ", i, query_caps(**inst, pds[i], static_cast<int>(i)).info.name);
    }
    return make_error(ErrorCode::kUnavailable, fmt::format("Vulkan device index {} is out of range: {} device{} found "
                                                           "({}); pick one of 0..{}",
                                                           index, pds.size(), pds.size() == 1 ? "" : "s", found,
                                                           pds.size() - 1));
  }
  DeviceCaps caps = query_caps(**inst, pds[index], index);
  if (!caps.unusable.empty()) return make_error(ErrorCode::kUnavailable, caps.unusable);
  // Host timing on request: for devices whose timestamps misbehave, and to test the fallback.
  if (const char* v = std::getenv("GPUSIM_VULKAN_HOST_TIMERS"); v != nullptr && std::string_view(v) == "1") {
    caps.info.timer_resolution_ns = 0;
  }
  auto backend = std::make_unique<VulkanBackend>(std::move(*inst), std::move(caps));
  if (auto s = backend->init(); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace gpusim::backend::vulkan
