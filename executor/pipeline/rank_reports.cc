#include "executor/pipeline/rank_reports.h"

#include <bit>
#include <cstring>
#include <numeric>

#include "ir/error.h"

namespace pipetrain::exec {

namespace {

// Reports travel as i64 tables (doubles bit-cast, exact) and text as bytes.
int64_t bits(double x) {
  return std::bit_cast<int64_t>(x);
}
double real(int64_t x) {
  return std::bit_cast<double>(x);
}

ir::Tensor table(const std::vector<int64_t>& cells, int64_t columns) {
  ir::Tensor t(ir::DType::kI64, {static_cast<int64_t>(cells.size()) / columns, columns});
  if (!cells.empty()) std::memcpy(t.raw(), cells.data(), cells.size() * sizeof(int64_t));
  return t;
}

ir::Tensor text(const std::string& s) {
  ir::Tensor t(ir::DType::kBool, {static_cast<int64_t>(s.size())});
  if (!s.empty()) std::memcpy(t.raw(), s.data(), s.size());
  return t;
}

std::string text_of(const ir::Tensor& t) {
  return std::string(static_cast<const char*>(t.raw()), t.nbytes());
}

MessageTag tag(const std::string& what, int64_t round) {
  return {"pipeline/" + what, round, MessageTag::kCollective};
}

// worker, busy, stage, replica, in flight, versions, stash, params, gradients, optimizer,
// provisional, redone, before-update copy
constexpr int64_t kWorkerColumns = 22;
constexpr int64_t kLossColumns = 3;  // worker, microbatch, loss
constexpr int64_t kGradColumns = 5;  // worker, stage, replica, update, sum of squares
constexpr int64_t kOpColumns = 9;    // worker, kind, stage, mb, payload, peer, start, end, -

}  // namespace

std::vector<WorkerReport> gather_reports(Communicator& comm, int64_t round,
                                         std::vector<WorkerReport> mine) {
  if (comm.rank() != 0) {
    std::vector<int64_t> workers, losses, grads, ops;
    for (const auto& w : mine) {
      workers.insert(
          workers.end(),
          {w.worker, bits(w.busy_s), w.stats.stage, w.stats.replica, w.stats.peak_in_flight,
           w.stats.peak_weight_versions, static_cast<int64_t>(w.stats.peak_stash_bytes),
           static_cast<int64_t>(w.stats.param_bytes),
           static_cast<int64_t>(w.stats.peak_gradient_bytes),
           static_cast<int64_t>(w.stats.optimizer_bytes), w.stats.provisional_updates,
           w.stats.redone_updates, static_cast<int64_t>(w.stats.before_update_bytes),
           w.stats.rounds});
      for (const TransferStats* l : {&w.stats.ledger, &w.stats.ledger_warm})
        workers.insert(
            workers.end(),
            {static_cast<int64_t>(l->to_device), static_cast<int64_t>(l->to_host),
             static_cast<int64_t>(l->host_syncs), static_cast<int64_t>(l->device_allocations)});
      for (const auto& [mb, loss] : w.losses)
        losses.insert(losses.end(), {w.worker, mb, bits(loss)});
      for (const auto& g : w.grad_sq)
        grads.insert(grads.end(), {w.worker, g.stage, g.replica, g.update, bits(g.sum_sq)});
      for (const auto& t : w.ops)
        ops.insert(ops.end(),
                   {w.worker, static_cast<int64_t>(t.op.kind), t.op.stage, t.op.microbatch,
                    static_cast<int64_t>(t.op.payload), t.op.peer, bits(t.start), bits(t.end), 0});
    }
    comm.send(0, tag("workers", round), table(workers, kWorkerColumns));
    comm.send(0, tag("losses", round), table(losses, kLossColumns));
    comm.send(0, tag("grads", round), table(grads, kGradColumns));
    comm.send(0, tag("ops", round), table(ops, kOpColumns));
    return mine;
  }
  std::vector<WorkerReport> all = std::move(mine);
  for (int r = 1; r < comm.size(); ++r) {
    const ir::Tensor workers = comm.recv(r, tag("workers", round));
    const ir::Tensor losses = comm.recv(r, tag("losses", round));
    const ir::Tensor grads = comm.recv(r, tag("grads", round));
    const ir::Tensor ops = comm.recv(r, tag("ops", round));
    const size_t first = all.size();
    const int64_t* c = workers.data<int64_t>();
    for (int64_t i = 0; i < workers.shape()[0]; ++i, c += kWorkerColumns) {
      WorkerReport w;
      w.worker = static_cast<int>(c[0]);
      w.busy_s = real(c[1]);
      auto ledger = [](const int64_t* l) {
        return TransferStats{static_cast<size_t>(l[0]), static_cast<size_t>(l[1]),
                             static_cast<size_t>(l[2]), static_cast<size_t>(l[3])};
      };
      w.stats = {static_cast<int>(c[2]),
                 static_cast<int>(c[3]),
                 static_cast<int>(c[4]),
                 static_cast<int>(c[5]),
                 static_cast<size_t>(c[6]),
                 static_cast<size_t>(c[7]),
                 static_cast<size_t>(c[8]),
                 static_cast<size_t>(c[9]),
                 static_cast<int>(c[10]),
                 static_cast<int>(c[11]),
                 static_cast<size_t>(c[12]),
                 static_cast<int>(c[13]),
                 ledger(c + 14),
                 ledger(c + 18)};
      all.push_back(std::move(w));
    }
    auto report_of = [&](int64_t worker) -> WorkerReport& {
      for (size_t i = first; i < all.size(); ++i)
        if (all[i].worker == worker) return all[i];
      throw RuntimeFault("rank " + std::to_string(r) + " reported on worker " +
                         std::to_string(worker) + ", which it does not run");
    };
    c = losses.data<int64_t>();
    for (int64_t i = 0; i < losses.shape()[0]; ++i, c += kLossColumns)
      report_of(c[0]).losses.emplace_back(c[1], real(c[2]));
    c = grads.data<int64_t>();
    for (int64_t i = 0; i < grads.shape()[0]; ++i, c += kGradColumns)
      report_of(c[0]).grad_sq.push_back(
          {static_cast<int>(c[1]), static_cast<int>(c[2]), c[3], real(c[4])});
    c = ops.data<int64_t>();
    for (int64_t i = 0; i < ops.shape()[0]; ++i, c += kOpColumns) {
      partitioner::TimedOp t;
      t.worker = static_cast<int>(c[0]);
      t.op.kind = static_cast<partitioner::OpKind>(c[1]);
      t.op.stage = static_cast<int>(c[2]);
      t.op.microbatch = static_cast<int>(c[3]);
      t.op.payload = static_cast<partitioner::Payload>(c[4]);
      t.op.peer = static_cast<int>(c[5]);
      t.start = real(c[6]);
      t.end = real(c[7]);
      report_of(c[0]).ops.push_back(t);
    }
  }
  return all;
}

std::vector<StateValue> gather_state(Communicator& comm, int64_t round,
                                     const std::vector<StateValue>& mine) {
  if (comm.rank() != 0) {
    std::string manifest;
    for (const auto& v : mine)
      manifest += std::to_string(static_cast<int>(v.role)) + " " + v.name + "\n";
    comm.send(0, tag("state", round), text(manifest));
    for (const auto& v : mine) comm.send(0, tag("state/" + v.name, round), v.value);
    return {};
  }
  std::vector<StateValue> all;
  for (int r = 1; r < comm.size(); ++r) {
    const std::string manifest = text_of(comm.recv(r, tag("state", round)));
    for (size_t at = 0; at < manifest.size();) {
      const size_t space = manifest.find(' ', at), end = manifest.find('\n', at);
      StateValue v;
      v.role = static_cast<ir::Role>(std::stoi(manifest.substr(at, space - at)));
      v.name = manifest.substr(space + 1, end - space - 1);
      v.value = comm.recv(r, tag("state/" + v.name, round));
      all.push_back(std::move(v));
      at = end + 1;
    }
  }
  return all;
}

std::string share_text(Communicator& comm, const std::string& what, const std::string& s) {
  if (comm.rank() != 0) return text_of(comm.recv(0, tag(what, 0)));
  for (int r = 1; r < comm.size(); ++r) comm.send(r, tag(what, 0), text(s));
  return s;
}

std::vector<std::string> gather_text(Communicator& comm, const std::string& what,
                                     const std::string& mine) {
  if (comm.rank() != 0) {
    comm.send(0, tag(what, 0), text(mine));
    return {};
  }
  std::vector<std::string> all = {mine};
  for (int r = 1; r < comm.size(); ++r) all.push_back(text_of(comm.recv(r, tag(what, 0))));
  return all;
}

bool any_rank(Communicator& comm, bool flag) {
  std::vector<int> all(static_cast<size_t>(comm.size()));
  std::iota(all.begin(), all.end(), 0);
  ir::Tensor t(ir::DType::kI64, {1});
  t.data<int64_t>()[0] = flag ? 1 : 0;
  comm.allreduce_sum(all, {&t});
  return t.data<int64_t>()[0] > 0;
}

}  // namespace pipetrain::exec
