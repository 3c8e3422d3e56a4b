#include "executor/cpu/kernels/bf16.h"

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "executor/cpu/kernels/dnnl_util.h"
#include "executor/device/bf16.h"

namespace pipetrain::exec::cpu {

namespace du = dnnl_util;

bool native_bf16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;  // the ISA values are nested bit sets
}

std::string dnnl_isa_name() {
  static const std::map<dnnl::cpu_isa, std::string> names = {
      {dnnl::cpu_isa::sse41, "sse41"},
      {dnnl::cpu_isa::avx, "avx"},
      {dnnl::cpu_isa::avx2, "avx2"},
      {dnnl::cpu_isa::avx2_vnni, "avx2_vnni"},
      {dnnl::cpu_isa::avx512_core, "avx512_core"},
      {dnnl::cpu_isa::avx512_core_vnni, "avx512_core_vnni"},
      {dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
      {dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"}};
  auto it = names.find(dnnl::get_effective_cpu_isa());
  return it == names.end() ? "another ISA" : it->second;
}

void round_bf16_in_place(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = device::round_bf16(x[i]);
}

void run_on_rounded_copies(KernelContext& ctx, KernelFn fp32) {
  std::vector<ir::Tensor> rounded;
  rounded.reserve(ctx.inputs.size());
  KernelContext c = ctx;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const ir::Tensor* t = c.inputs[i];
    if (!t || t->dtype() != ir::DType::kF32) continue;
    rounded.push_back(t->clone());
    round_bf16_in_place(rounded.back().data<float>(), rounded.back().numel());
    c.inputs[i] = &rounded.back();
    if (i < c.input_is_value.size()) c.input_is_value[i] = false;  // not the cached bytes
  }
  fp32(c);
  for (ir::Tensor* t : ctx.outputs)
    if (t && t->dtype() == ir::DType::kF32) round_bf16_in_place(t->data<float>(), t->numel());
}

namespace {

// round_bf16's upper half: nearest even, NaN kept a (quiet) NaN. A loop the
// compiler vectorizes: ~4x the rate of oneDNN's f32-to-bf16 reorder, whose
// time was a quarter of the transformer's bf16 GEMMs.
void to_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = device::bits_of(src[i]);
    const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
    dst[i] =
        static_cast<uint16_t>(nan ? (b >> 16) | 0x40u : (b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  }
}

// Graph values' bf16 copies, one per (address, values_version); bounded as
// dnnl_util::WeightCache is (reallocated weights leave stale entries).
class ValueCopies {
 public:
  dnnl::memory get(const float* data, int64_t n, uint64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(data);
    if (it != entries_.end() && it->second.version == version && it->second.n == n)
      return it->second.copy;
    return {};
  }
  void put(const float* data, int64_t n, uint64_t version, const dnnl::memory& copy) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= 256 && !entries_.count(data)) entries_.clear();
    entries_[data] = Entry{version, n, copy};
  }

 private:
  struct Entry {
    uint64_t version = 0;
    int64_t n = 0;
    dnnl::memory copy;
  };
  std::mutex mu_;
  std::unordered_map<const float*, Entry> entries_;  // guarded by mu_
};

}  // namespace

dnnl::memory bf16_copy(const float* data, int64_t n, bool is_value, uint64_t version) {
  static ValueCopies values;
  // Version 0 promises nothing: another model's weights may since sit at this address.
  const bool cacheable = is_value && version != 0;
  if (cacheable)
    if (dnnl::memory m = values.get(data, n, version)) return m;
  dnnl::memory m(
      dnnl::memory::desc({n}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::a),
      du::engine());
  to_bf16(data, static_cast<uint16_t*>(m.get_data_handle()), n);
  if (cacheable) values.put(data, n, version, m);
  return m;
}

}  // namespace pipetrain::exec::cpu
