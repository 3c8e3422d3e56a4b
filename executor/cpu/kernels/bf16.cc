#include "executor/cpu/kernels/bf16.h"

#include <map>
#include <vector>

#include "executor/cpu/kernels/cpu_threads.h"
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
  for_each_index(n, 2, [&](int64_t i) { x[i] = device::round_bf16(x[i]); });
}

void run_on_rounded_copies(KernelContext& ctx, const std::function<void(KernelContext&)>& fp32) {
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
  for_each_index(n, 2, [&](int64_t i) {
    const uint32_t b = device::bits_of(src[i]);
    const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
    dst[i] =
        static_cast<uint16_t>(nan ? (b >> 16) | 0x40u : (b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  });
}

}  // namespace

dnnl::memory bf16_copy(const float* data, int64_t n, bool is_value, uint64_t version) {
  // One cache per size: a graph value converted once per values_version.
  auto values = du::cached_as<du::WeightCache>("bf16 copies n" + std::to_string(n),
                                               [] { return std::make_shared<du::WeightCache>(); });
  return values->get(data, is_value, version, [&] {
    dnnl::memory m(
        dnnl::memory::desc({n}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::a),
        du::engine());
    to_bf16(data, static_cast<uint16_t*>(m.get_data_handle()), n);
    return m;
  });
}

}  // namespace pipetrain::exec::cpu
