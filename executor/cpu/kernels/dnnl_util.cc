#include "executor/cpu/kernels/dnnl_util.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "executor/cpu/kernels/cpu_threads.h"

namespace pipetrain::exec::cpu::dnnl_util {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  apply_dnnl_threads();
  thread_local dnnl::stream s(engine());
  return s;
}

std::shared_ptr<void> cached(const std::string& key,
                             const std::function<std::shared_ptr<void>()>& make) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<void>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  // Built outside the lock: primitive creation can take milliseconds.
  std::shared_ptr<void> made = make();
  std::lock_guard<std::mutex> lock(mu);
  return cache.emplace(key, std::move(made)).first->second;
}

dnnl::memory::desc plain_desc(const ir::Shape& dims, const ir::Shape& strides) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()),
                            dnnl::memory::data_type::f32,
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

dnnl::memory::desc plain_desc(const ir::Shape& dims) {
  return plain_desc(dims, ir::strides_of(dims));
}

dnnl::memory scratchpad(const dnnl::memory::desc& d) {
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffer;
  const size_t need = d.get_size();
  if (need > buffer.bytes) {
    std::free(buffer.data);
    buffer.bytes = (need + 4095) / 4096 * 4096;
    buffer.data = std::aligned_alloc(64, buffer.bytes);
  }
  return dnnl::memory(d, engine(), buffer.data);
}

dnnl::memory::desc any_layout(const dnnl::memory::desc& d, bool bf16) {
  return dnnl::memory::desc(d.dims(),
                            bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::any);
}

dnnl::primitive_attr matmul_attr(float alpha, float sum) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (sum != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(sum);
    attr.set_post_ops(ops);
  }
  return attr;
}

std::string key_of(const ir::Shape& s) {
  return ir::shape_str(s);
}

dnnl::memory WeightCache::get(const dnnl::reorder& reorder, const dnnl::memory::desc& user,
                              const dnnl::memory::desc& inner, const float* data, bool is_value,
                              uint64_t version) {
  return get(data, is_value, version, [&] {
    dnnl::memory from(user, engine(), const_cast<float*>(data));  // only read
    dnnl::memory w(inner, engine());
    reorder.execute(stream(), from, w);
    stream().wait();
    return w;
  });
}

dnnl::memory WeightCache::get(const float* data, bool is_value, uint64_t version,
                              const std::function<dnnl::memory()>& make) {
  // Version 0 promises nothing: another model's weights may since sit at this address.
  const bool cacheable = is_value && version != 0;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(data);
    if (it != entries_.end() && it->second.version == version) return it->second.w;
  }
  dnnl::memory w = make();
  if (cacheable) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= kMaxEntries && !entries_.count(data)) entries_.clear();
    entries_[data] = Entry{version, w};
  }
  return w;
}

}  // namespace pipetrain::exec::cpu::dnnl_util

namespace pipetrain::exec::cpu::dnnl_util {

std::string representative_kernels() {
  using memory = dnnl::memory;
  auto any = [](const memory::dims& d) {
    return memory::desc(d, memory::data_type::f32, memory::format_tag::any);
  };
  const memory::dims x = {8, 64, 28, 28}, w = {64, 64, 3, 3};
  std::string out;
  try {
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                       dnnl::algorithm::convolution_direct, any(x), any(w), any(x),
                                       {1, 1}, {1, 1}, {1, 1});
    dnnl::convolution_forward::primitive_desc fwd(fd, engine());
    dnnl::convolution_backward_data::primitive_desc data(
        {dnnl::algorithm::convolution_direct, any(x), any(w), any(x), {1, 1}, {1, 1}, {1, 1}},
        engine(), fwd);
    dnnl::convolution_backward_weights::primitive_desc weights(
        {dnnl::algorithm::convolution_direct, any(x), any(w), any(x), {1, 1}, {1, 1}, {1, 1}},
        engine(), fwd);
    out = "conv " + std::string(fwd.impl_info_str()) + ", its backward data " +
          data.impl_info_str() + " and weights " + weights.impl_info_str();
  } catch (const dnnl::error& e) {
    out = std::string("conv: none (") + e.what() + ")";
  }
  try {
    dnnl::matmul::primitive_desc mm(
        dnnl::matmul::desc(plain_desc({256, 1024}), plain_desc({1024, 1024}),
                           plain_desc({256, 1024})),
        engine());
    out += std::string(", weight product ") + mm.impl_info_str();
  } catch (const dnnl::error&) {
  }
  return out;
}

}  // namespace pipetrain::exec::cpu::dnnl_util
