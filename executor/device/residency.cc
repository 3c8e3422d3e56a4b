#include "executor/device/residency.h"

#include <cstring>

#include "ir/error.h"

namespace pipetrain::exec::device {

Residency::~Residency() {
  for (auto& [host, e] : entries_) memory_.release(e.device, alloc_size(e.bytes));
}

void Residency::begin_run(uint64_t values_version) {
  if (active_) throw RuntimeFault("a device run began inside another");
  active_ = true;
  // Another version drops the cached values; kept tensors go with their handles only.
  const bool new_version = values_version != values_version_;
  values_version_ = values_version;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->second.kept ? it->second.owner.expired() : new_version) drop(it);
    it = next;
  }
}

void Residency::end_run() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    // Version 0 promises nothing about the values (the next run's may be
    // other buffers at the same addresses): only real versions keep them.
    const Entry& e = it->second;
    if (e.kept ? e.owner.expired() : (!e.value || values_version_ == 0)) drop(it);
    it = next;
  }
  active_ = false;
}

void Residency::drop(Entries::iterator it) {
  memory_.release(it->second.device, alloc_size(it->second.bytes));
  entries_.erase(it);
}

Residency::Entries::iterator Residency::find(const ir::Tensor& t) {
  auto it = entries_.find(t.raw());
  if (it != entries_.end() && it->second.kept && it->second.owner.expired()) {
    drop(it);
    return entries_.end();
  }
  return it;
}

size_t Residency::kept_count() const {
  size_t n = 0;
  for (const auto& [host, e] : entries_) n += e.kept && !e.owner.expired();
  return n;
}

ir::Tensor Residency::keep(const ir::Tensor& t) {
  auto it = find(t);
  if (it == entries_.end() || !it->second.device_newer || it->second.bytes != t.nbytes())
    return t.clone();
  ir::Tensor keeper = ir::Tensor::uninitialized(t.dtype(), t.shape());
  if (poison_ && t.nbytes()) std::memset(keeper.raw(), 0xFF, t.nbytes());
  Entry e = it->second;  // the device buffer changes hands, no copy
  entries_.erase(it);
  e.kept = true;
  e.value = false;
  e.owner = keeper.storage();
  entries_.emplace(keeper.raw(), std::move(e));
  return keeper;
}

const void* Residency::input(const ir::Tensor& t, bool is_value) {
  const size_t bytes = t.nbytes();
  auto it = find(t);
  if (it != entries_.end() && it->second.bytes == bytes) return it->second.device;
  if (it != entries_.end()) {  // another tensor at this address: settle it first
    if (it->second.device_newer)
      throw RuntimeFault("device residency: a " + std::to_string(bytes) +
                         "-byte input overlaps a newer " + std::to_string(it->second.bytes) +
                         "-byte device tensor at the same host address");
    drop(it);
  }
  Entry e;
  e.bytes = bytes;
  e.value = is_value;
  e.device = memory_.allocate(alloc_size(bytes));
  if (bytes) memory_.upload(e.device, t.raw(), bytes);
  uploaded_ += bytes;
  return entries_.emplace(t.raw(), e).first->second.device;
}

void* Residency::output(const ir::Tensor& t) {
  auto it = find(t);
  if (it != entries_.end()) drop(it);  // an earlier tensor in this slot, or stale bytes
  Entry e;
  e.bytes = t.nbytes();
  e.device_newer = true;
  e.device = memory_.allocate(alloc_size(e.bytes));
  if (e.bytes) memory_.zero(e.device, e.bytes);
  if (poison_ && e.bytes) std::memset(const_cast<void*>(t.raw()), 0xFF, e.bytes);
  return entries_.emplace(t.raw(), e).first->second.device;
}

void Residency::to_host(const ir::Tensor& t) {
  auto it = find(t);
  if (it == entries_.end() || !it->second.device_newer) return;
  if (it->second.bytes != t.nbytes())
    throw RuntimeFault("device residency: reading " + std::to_string(t.nbytes()) + " bytes of a " +
                       std::to_string(it->second.bytes) + "-byte device tensor");
  if (it->second.bytes) {
    memory_.download(const_cast<void*>(t.raw()), it->second.device, it->second.bytes);
    ++downloads_;
  }
  downloaded_ += it->second.bytes;
  it->second.device_newer = false;
}

void Residency::host_wrote(const ir::Tensor& t) {
  auto it = find(t);
  if (it != entries_.end()) drop(it);
}

void Residency::release(const ir::Tensor& t) {
  auto it = find(t);
  if (it != entries_.end() && !it->second.value && !it->second.kept) drop(it);
}

}  // namespace pipetrain::exec::device
