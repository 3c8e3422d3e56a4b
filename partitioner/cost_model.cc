#include "partitioner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "ir/error.h"

namespace pipetrain::partitioner {

ChainCosts::ChainCosts(const Profile& profile, const Topology& topology)
    : n_(static_cast<int>(profile.layers.size())), topology_(topology) {
  compute_.assign(n_ + 1, 0.0);
  forward_.assign(n_ + 1, 0.0);
  params_.assign(n_ + 1, 0.0);
  acts_.assign(n_ + 1, 0.0);
  inputs_.assign(n_ + 1, 0.0);
  cut_.assign(n_, 0.0);
  cut_stash_.assign(n_, 0.0);
  for (int l = 0; l < n_; ++l) {
    const LayerProfile& lp = profile.layers[l];
    compute_[l + 1] = compute_[l] + lp.forward_s + lp.backward_s;
    forward_[l + 1] = forward_[l] + lp.forward_s;
    params_[l + 1] = params_[l] + static_cast<double>(lp.param_bytes);
    acts_[l + 1] = acts_[l] + static_cast<double>(lp.output_bytes);
    inputs_[l + 1] = inputs_[l] + static_cast<double>(lp.input_bytes);
    cut_[l] = static_cast<double>(lp.cut_bytes);
    cut_stash_[l] =
        static_cast<double>(profile.stash_at_readers ? lp.cut_stash_bytes : lp.cut_bytes);
  }
  tied_ = profile.tied;
  const int w = topology_.workers();
  if (w <= 512) {
    link_stride_ = w + 2;
    links_.resize(static_cast<size_t>(w + 1) * static_cast<size_t>(link_stride_));
    for (int first = 0; first <= w; ++first)
      for (int count = 0; count < link_stride_; ++count)
        links_[static_cast<size_t>(first * link_stride_ + count)] = {
            topology_.slowest_link(first, count), topology_.slowest_link_latency(first, count)};
    stage_links_.resize(links_.size());
    for (int first = 0; first < w; ++first)
      for (int r = 1; first + r <= w; ++r)
        stage_links_[static_cast<size_t>(first * link_stride_ + r)] = compute_stage_links(first, r);
  }
}

ChainCosts::StageLinks ChainCosts::compute_stage_links(int first, int r) const {
  StageLinks s;
  s.inv_r = 1.0 / r;
  if (r > 1) {
    const Link ar = link(first, r);
    s.ar_per_byte = 4.0 * (r - 1) / (ar.bandwidth * r) * s.inv_r;
    s.ar_fixed = 2.0 * (r - 1) * ar.latency * s.inv_r;
  }
  if (first > 0) {
    const Link in = link(first - 1, r + 1);
    s.in_per_byte = 2.0 / in.bandwidth * s.inv_r;
    s.in_fixed = 2.0 * in.latency * s.inv_r;
  }
  const Link out = link(first, r + 1);
  s.out_per_byte = 2.0 / out.bandwidth * s.inv_r;
  s.out_fixed = 2.0 * out.latency * s.inv_r;
  return s;
}

ChainCosts::Link ChainCosts::link(int first, int count) const {
  if (link_stride_ > 0 && first >= 0 && count >= 0 && first <= link_stride_ - 2 &&
      count < link_stride_)
    return links_[static_cast<size_t>(first * link_stride_ + count)];
  return {topology_.slowest_link(first, count), topology_.slowest_link_latency(first, count)};
}

double ChainCosts::tied(int i, int j) const {
  double s = 0;
  const int w = topology_.workers();
  for (const auto& t : tied_) {
    const bool inside =
        std::any_of(t.layers.begin(), t.layers.end(), [&](int l) { return l >= i && l <= j; });
    const bool outside =
        std::any_of(t.layers.begin(), t.layers.end(), [&](int l) { return l < i || l > j; });
    if (inside && outside)
      s += static_cast<double>(t.bytes) / topology_.slowest_link(0, w) +
           2 * topology_.slowest_link_latency(0, w);
  }
  return s;
}

double ChainCosts::memory(int i, int j, int r, int downstream, bool recompute) const {
  const double p = params(i, j);
  const int in_flight = (downstream + r - 1) / r;
  if (recompute)  // the forward's inputs, received and fed
    return in_flight * (cut(i - 1) + inputs(i, j) + p) + activations(i, j) + p;
  const double input = i > 0 ? cut_stash_[static_cast<size_t>(i - 1)] : 0.0;  // received, kept
  return in_flight * (activations(i, j) + input + p) + p;
}

StageCost ChainCosts::stage(int i, int j, int first, int r, int downstream, bool recompute) const {
  StageCost c;
  double work = compute(i, j) + (recompute ? forward(i, j) : 0.0);
  double p = params(i, j);
  c.recompute = recompute;
  c.compute_s = work / r;
  // Per message a link's latency, then its bandwidth (activation out, gradient back).
  auto transfer = [&](int from, int count, double bytes) {
    const Link l = link(from, count);
    return 2.0 * (bytes / l.bandwidth + l.latency) / r;
  };
  if (r > 1) {
    const Link l = link(first, r);
    c.allreduce_s = (4.0 * (r - 1) * p / (l.bandwidth * r) + 2.0 * (r - 1) * l.latency) / r;
  }
  if (i > 0) c.transfer_in_s = transfer(first - 1, r + 1, cut(i - 1));
  if (j < n_ - 1) c.transfer_out_s = transfer(first, r + 1, cut(j));
  c.tied_s = tied_.empty() ? 0.0 : tied(i, j);
  c.time_s = StageTimer(*this, i, first, r, recompute).time(j);  // the DP's figure, bit for bit
  c.in_flight = (downstream + r - 1) / r;
  c.memory_bytes = memory(i, j, r, downstream, recompute);
  return c;
}

double data_parallel_time(const ChainCosts& costs) {
  int n = costs.topology().workers();
  return costs.stage(0, costs.size() - 1, 0, n, n).time_s;
}

Plan evaluate_plan(const Profile& profile, const Topology& topology,
                   const std::vector<int>& last_layers, const std::vector<int>& replication,
                   const std::string& strategy, int first_worker,
                   const std::vector<bool>& recompute) {
  ChainCosts costs(profile, topology);
  Plan plan;
  plan.model = profile.model;
  plan.strategy = strategy;
  plan.topology = topology;
  plan.num_layers = costs.size();
  int total = 0;
  for (int r : replication) total += r;
  int first = first_worker, begin = 0;
  std::vector<double> own_time;  // each stage's time before its round trip bounds it
  for (size_t s = 0; s < last_layers.size(); ++s) {
    StagePlan st;
    st.first_layer = begin;
    st.last_layer = last_layers[s];
    st.replication = replication[s];
    st.first_layer_name = profile.layers[begin].name;
    st.last_layer_name = profile.layers[st.last_layer].name;
    for (int l = begin; l <= st.last_layer; ++l)
      st.nodes.insert(st.nodes.end(), profile.layers[l].nodes.begin(),
                      profile.layers[l].nodes.end());
    for (int w = 0; w < st.replication; ++w) st.workers.push_back(first + w);
    st.recompute = s < recompute.size() && recompute[s];
    StageCost c = costs.stage(begin, st.last_layer, first, st.replication,
                              total - (first - first_worker), st.recompute);
    st.compute_s = c.compute_s;
    st.allreduce_s = c.allreduce_s;
    st.tied_s = c.tied_s;
    st.transfer_in_s = c.transfer_in_s;
    st.transfer_out_s = c.transfer_out_s;
    st.time_s = c.time_s;
    own_time.push_back(c.time_s);
    st.in_flight = c.in_flight;
    st.memory_bytes = c.memory_bytes;
    first += st.replication;
    begin = st.last_layer + 1;
    plan.stages.push_back(std::move(st));
  }
  // Round trips, from the last stage back: E gathers the messages and
  // recomputed forwards downstream of each stage.
  double extra = 0;
  for (size_t s = plan.stages.size(); s-- > 0;) {
    StagePlan& st = plan.stages[s];
    if (st.recompute) extra += costs.forward(st.first_layer, st.last_layer);
    if (s + 1 < plan.stages.size()) {
      const StagePlan& down = plan.stages[s + 1];
      extra +=
          2.0 * costs.message(st.last_layer, st.workers.front(), st.replication + down.replication);
      // Rounds gathering across the cut (lockstep replicas), with each
      // stage's own time: the later one's is not yet bounded by its trip.
      extra += lockstep_waits(round_shape(st.allreduce_s, st.replication, st.time_s),
                              round_shape(down.allreduce_s, down.replication, own_time[s + 1]));
    }
    const int downstream = total - (st.workers.front() - first_worker);
    st.round_trip_s = costs.round_trip(st.first_layer, st.replication, downstream, extra);
    st.time_s = std::max(st.time_s, st.round_trip_s);
    plan.time_per_minibatch_s = std::max(plan.time_per_minibatch_s, st.time_s);
  }
  plan.noam = (total + replication[0] - 1) / replication[0];
  plan.single_worker_s = costs.compute(0, costs.size() - 1);
  plan.data_parallel_s = data_parallel_time(costs);
  return plan;
}

}  // namespace pipetrain::partitioner
