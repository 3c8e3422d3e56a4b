#include "executor/pipeline/delayed_ties.h"

#include <algorithm>
#include <cstring>

#include "ir/error.h"

namespace pipetrain::exec {

void DelayedTies::exchange(Communicator& comm, const std::function<int(int stage)>& worker_of,
                           int stage, const std::string& param, const std::vector<int>& stages,
                           int step, int count, int64_t base, ir::Tensor& grad) {
  if (grad.dtype() != ir::DType::kF32)
    throw RuntimeFault("tied param '" + param + "': only float32 gradients can be exchanged");
  auto tag = [&](int s) { return MessageTag{param, base + s, MessageTag::kTied}; };
  ir::Tensor mine = grad.clone();  // a handle the receivers own: never written again
  for (int s : stages)
    if (s != stage) comm.send(worker_of(s), tag(step), mine);
  auto& kept = own_[{stage, param}];
  kept[step] = mine;
  const bool last = step == count - 1;
  float* sum = grad.data<float>();
  const int64_t n = grad.numel();
  bool first = true;
  for (int s : stages) {  // ascending on every holder: bitwise the same sums
    const int d = partitioner::tied_delay(stages, s);
    for (int j = std::max(0, step - d); j <= (last ? step : step - d); ++j) {
      ir::Tensor part;
      if (s == stage) {
        part = kept.at(j);
        kept.erase(j);
      } else {
        part = comm.recv(worker_of(s), tag(j));
      }
      if (part.numel() != n)
        throw RuntimeFault("tied param '" + param + "': stage " + std::to_string(s) +
                           " sent a partial gradient of " + std::to_string(part.numel()) +
                           " elements, not " + std::to_string(n));
      const float* x = part.data<float>();
      if (first)
        std::memcpy(sum, x, grad.nbytes());
      else
        for (int64_t i = 0; i < n; ++i) sum[i] += x[i];
      first = false;
    }
  }
  if (last && !kept.empty())
    throw RuntimeFault("tied param '" + param + "': partials left over at the end of a round");
}

}  // namespace pipetrain::exec
