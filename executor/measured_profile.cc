#include "executor/measured_profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "executor/pipeline/stage_worker.h"
#include "executor/stage_program.h"
#include "partitioner/profile_ir.h"

namespace pipetrain::exec {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of one update over `params` (copies; small non-zero grads)
// as the pipeline makes it: the finiteness check, then the optimizer step.
double time_update(const ir::Graph& g, const std::vector<std::string>& params,
                   const OptimizerConfig& config, int warmup, int runs) {
  ir::Graph scratch;
  std::map<std::string, ir::Tensor> grads;
  for (const auto& p : params) {
    const ir::Tensor& v = *g.value(p);
    scratch.set_value(p, v.clone(), ir::Role::kParam);
    ir::Tensor grad = v.clone();
    for (int64_t i = 0, n = grad.numel(); i < n; ++i) grad.data<float>()[i] *= 1e-3f;
    grads[p] = grad;
  }
  auto opt = Optimizer::create(config, scratch, params);
  std::vector<double> t;
  for (int r = 0; r < warmup + runs; ++r) {
    auto start = std::chrono::steady_clock::now();
    bool finite = true;
    for (const auto& [name, grad] : grads) finite = finite && all_finite(grad);
    if (finite) opt->step(scratch, grads, config.lr);
    if (r >= warmup)
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(std::move(t));
}

// Median seconds of adding one microbatch's gradients of `params` into the
// step's sum (buffers of the same sizes), as the runner does for a kernel
// that cannot add into the sum itself.
double time_accumulate(const ir::Graph& g, const std::vector<std::string>& params, int warmup,
                       int runs) {
  std::vector<ir::Tensor> src, dst;
  for (const auto& p : params) {
    src.push_back(*g.value(p));
    dst.push_back(g.value(p)->clone());
  }
  std::vector<double> t;
  for (int r = 0; r < warmup + runs; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < src.size(); ++i) {
      float* a = dst[i].data<float>();
      const float* x = src[i].data<float>();
      for (int64_t k = 0, n = src[i].numel(); k < n; ++k) a[k] += x[k];
    }
    if (r >= warmup)
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(std::move(t));
}

// Training steps run over and over on `count` threads, each on its own copy
// of the graph, until destroyed: the other workers of a pipeline that share
// the cores, so that a profile taken meanwhile pays the contention they cause
// (memory bandwidth, caches, the cores themselves when there are more workers
// than cores). Construction returns once each has finished one step.
class Neighbours {
 public:
  Neighbours(const ir::Graph& g, const std::map<std::string, ir::Tensor>& feeds, int count,
             const std::function<std::unique_ptr<Backend>()>& make_backend)
      : graphs_(static_cast<size_t>(count), g) {
    // Values cloned here, before anything runs: BatchNorm's buffers change in place.
    for (auto& own : graphs_)
      for (const auto& [name, v] : g.values()) own.set_value(name, v.clone(), g.tensor(name).role);
    std::atomic<int> started{0};
    for (auto& own : graphs_)
      threads_.emplace_back([this, &own, &feeds, &started, &make_backend] {
        bool first = true;
        try {
          auto backend = make_backend ? make_backend() : make_cpu_backend();  // the workers' kind
          ForwardRunner runner(own, *backend, /*plan_memory=*/true);
          for (; !stop_.load(); first = false) {
            RunOptions o;
            o.training = true;
            o.values_version = fresh_values_version();
            runner.run(feeds, o);
            if (first) started.fetch_add(1);
          }
        } catch (...) {  // the measured run meets the same error and reports it
          if (first) started.fetch_add(1);
        }
      });
    while (started.load() < count) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Neighbours() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
  }

 private:
  std::vector<ir::Graph> graphs_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace

partitioner::Profile measure_training_profile(
    const autodiff::TrainingGraph& tg, const std::map<std::string, ir::Tensor>& feeds, int warmup,
    int runs, const OptimizerConfig* optimizer, int neighbours,
    const std::function<std::unique_ptr<Backend>()>& make_backend) {
  auto backend = make_backend ? make_backend() : make_cpu_backend();
  std::optional<Neighbours> busy;
  if (neighbours > 0) busy.emplace(tg.graph, feeds, neighbours, make_backend);
  // One training step per run: backward nodes sit in their forward node's layer.
  ForwardRunner runner(tg.graph, *backend, /*plan_memory=*/true);
  std::vector<double> walls;
  partitioner::Profile p = partitioner::measured_profile(
      tg.graph,
      [&](std::vector<double>& node_seconds) {
        RunOptions o;
        o.training = true;
        o.node_seconds = &node_seconds;
        o.values_version = fresh_values_version();  // as in training: the step moved the weights
        auto start = std::chrono::steady_clock::now();
        runner.run(feeds, o);
        walls.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      },
      warmup, runs, backend->name());
  busy.reset();
  // What a run costs beyond its kernels (zero-filling outputs that kernels
  // accumulate into, feeding, freeing) is spread over the layers in
  // proportion to their time, so the profile sums to a real step.
  walls.erase(walls.begin(), walls.begin() + std::min<size_t>(walls.size(), size_t(warmup)));
  std::sort(walls.begin(), walls.end());
  const double kernels = p.compute_s();
  if (!walls.empty() && kernels > 0 && walls[walls.size() / 2] > kernels) {
    const double factor = walls[walls.size() / 2] / kernels;
    for (auto& l : p.layers) {
      l.forward_s *= factor;
      l.backward_s *= factor;
      if (l.backward_input_s > 0) l.backward_input_s *= factor;
    }
  }
  if (!optimizer) return p;
  // Each trained param belongs to the layer of the first forward node reading it.
  std::vector<std::vector<std::string>> layer_params(p.layers.size());
  std::set<std::string> seen;
  for (const auto& n : tg.graph.nodes) {
    if (n.backward) continue;
    for (const auto& in : n.inputs)
      if (tg.grads.count(in) && seen.insert(in).second)
        layer_params[static_cast<size_t>(n.layer)].push_back(in);
  }
  for (size_t l = 0; l < p.layers.size(); ++l)
    if (!layer_params[l].empty()) {
      p.layers[l].update_s = time_update(tg.graph, layer_params[l], *optimizer, warmup, runs);
      // Gradients whose kernels add into the accumulator (GEMMs) cost no pass of their own.
      std::vector<std::string> added;
      for (const auto& param : layer_params[l])
        if (!runner.accumulates_in_place(tg.grads.at(param))) added.push_back(param);
      if (!added.empty()) p.layers[l].accumulate_s = time_accumulate(tg.graph, added, warmup, runs);
    }
  return p;
}

namespace {

// What a stage receives from its neighbours, for timing only: normal
// floats (activations of scale 0.5; gradients of 1e-3, as a mean loss's are
// small), zeros of other types (valid indices).
ir::Tensor received_stand_in(const ir::TensorDesc& d, float scale, uint32_t salt) {
  ir::Tensor t(d.dtype, d.shape);
  if (d.dtype == ir::DType::kF32) {
    std::mt19937 rng(salt);
    std::normal_distribution<float> normal(0.0f, scale);
    float* x = t.data<float>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) x[i] = normal(rng);
  }
  return t;
}

// Scales field `f` of layers [first, last] so that they sum to `target`;
// layers with none of it share it evenly when the sum is 0.
template <typename Field>
void rescale(partitioner::Profile& p, int first, int last, Field f, double target) {
  double sum = 0;
  for (int l = first; l <= last; ++l) sum += p.layers[static_cast<size_t>(l)].*f;
  for (int l = first; l <= last; ++l) {
    double& v = p.layers[static_cast<size_t>(l)].*f;
    v = sum > 0 ? v * target / sum : target / (last - first + 1);
  }
}

// A stage's feeds for timing: its data inputs, stand-ins for what it receives.
TensorMap stage_feeds(const StageProgram& prog, const std::map<std::string, ir::Tensor>& feeds) {
  TensorMap in;
  for (const auto& name : prog.inputs) in[name] = feeds.at(name);
  uint32_t salt = 1;
  for (const auto& tr : prog.recv_fwd)
    in[tr.tensor] = received_stand_in(prog.forward.tensor(tr.tensor), 0.5f, salt++);
  for (const auto& tr : prog.recv_bwd)
    in[tr.tensor] = received_stand_in(prog.backward.tensor(tr.tensor), 1e-3f, salt++);
  return in;
}

}  // namespace

partitioner::Profile calibrate_to_stages(
    partitioner::Profile p, const autodiff::TrainingGraph& tg,
    const std::vector<std::pair<int, int>>& ranges, const std::map<std::string, ir::Tensor>& feeds,
    const OptimizerConfig& optimizer, int warmup, int runs, int neighbours,
    const std::function<std::unique_ptr<Backend>()>& make_backend, bool split_backward) {
  const std::vector<StageProgram> programs = build_stage_programs(tg, ranges);
  auto backend = make_backend ? make_backend() : make_cpu_backend();
  std::optional<Neighbours> busy;
  if (neighbours > 0) busy.emplace(tg.graph, feeds, neighbours, make_backend);
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  for (size_t s = 0; s < programs.size(); ++s) {
    const StageProgram& prog = programs[s];
    StageWorker worker(prog, tg, *backend, optimizer, split_backward,
                       /*recompute=*/false, /*overlapping_rounds=*/false);
    const TensorMap in = stage_feeds(prog, feeds);
    std::vector<double> fwd, bwd, upd, input_part;
    for (int r = 0; r < warmup + runs; ++r) {
      const auto t0 = Clock::now();
      worker.forward(r, worker.version(), in, static_cast<uint64_t>(r));
      const auto t1 = Clock::now();
      auto t_input = t1;
      if (split_backward) {  // B and W as the schedule runs them, each its own pass
        worker.backward_input(r, in);
        t_input = Clock::now();
        worker.backward_weight(r, in);
      } else {
        worker.backward(r, in);
      }
      const auto t2 = Clock::now();
      worker.seal_gradients(r);
      worker.gradients_finite(r);           // the pipeline's check, timed with the update
      worker.sealed_sum_of_squares(r, {});  // metrics' gradient norm, every update
      // At learning rate 0 the update does all its arithmetic but leaves the
      // weights as they were: learning the one batch run over and over drove
      // the GPT's softmax to one-hot, and its backward to subnormal
      // gradients, 3x slower than in training.
      worker.step(r, 1.0, 0.0, /*keep_old=*/false);
      const auto t3 = Clock::now();
      if (r < warmup) continue;
      fwd.push_back(seconds(t0, t1));
      bwd.push_back(seconds(t1, t2));
      upd.push_back(seconds(t2, t3));
      input_part.push_back(seconds(t1, t_input) / std::max(1e-12, seconds(t1, t2)));
    }
    const auto [first, last] = ranges[s];
    using L = partitioner::LayerProfile;
    rescale(p, first, last, &L::forward_s, median(fwd));
    // The split backward's input part (where measured) keeps its share, unless it was
    // timed here: then it takes the stage's measured share of the backward.
    double b_sum = 0, bi_sum = 0;
    for (int l = first; l <= last; ++l) {
      b_sum += p.layers[static_cast<size_t>(l)].backward_s;
      bi_sum += std::max(0.0, p.layers[static_cast<size_t>(l)].backward_input_s);
    }
    if (split_backward && b_sum > 0) {
      const double factor = median(bwd) / b_sum;
      const double input_share = median(input_part);
      for (int l = first; l <= last; ++l) {
        L& layer = p.layers[static_cast<size_t>(l)];
        const double share =
            bi_sum > 0 ? std::max(0.0, layer.backward_input_s) / bi_sum : layer.backward_s / b_sum;
        layer.backward_s *= factor;
        layer.backward_input_s = share * input_share * median(bwd);
      }
    } else if (b_sum > 0) {
      const double factor = median(bwd) / b_sum;
      for (int l = first; l <= last; ++l) {
        L& layer = p.layers[static_cast<size_t>(l)];
        layer.backward_s *= factor;
        if (layer.backward_input_s > 0) layer.backward_input_s *= factor;
      }
    } else {
      rescale(p, first, last, &L::backward_s, median(bwd));
    }
    rescale(p, first, last, &L::update_s, median(upd));
  }
  return p;
}

void measure_weight_steps(partitioner::Profile& p, const autodiff::TrainingGraph& minibatch_tg,
                          const std::vector<std::pair<int, int>>& ranges,
                          const std::map<std::string, ir::Tensor>& feeds,
                          const OptimizerConfig& optimizer, int warmup, int runs, int neighbours,
                          const std::function<std::unique_ptr<Backend>()>& make_backend) {
  const std::vector<StageProgram> programs = build_stage_programs(minibatch_tg, ranges);
  auto backend = make_backend ? make_backend() : make_cpu_backend();
  std::optional<Neighbours> busy;
  if (neighbours > 0) busy.emplace(minibatch_tg.graph, feeds, neighbours, make_backend);
  for (size_t s = 0; s < programs.size(); ++s) {
    StageWorker worker(programs[s], minibatch_tg, *backend, optimizer, /*split_backward=*/true,
                       /*recompute=*/false, /*overlapping_rounds=*/false);
    const TensorMap in = stage_feeds(programs[s], feeds);
    std::vector<double> weight;
    for (int r = 0; r < warmup + runs; ++r) {
      worker.forward(r, worker.version(), in, static_cast<uint64_t>(r));
      worker.backward_input(r, in);
      const auto t0 = std::chrono::steady_clock::now();
      worker.backward_weight(r, in);
      const auto t1 = std::chrono::steady_clock::now();
      worker.seal_gradients(r);
      worker.step(r, 1.0, 0.0, /*keep_old=*/false);  // lr 0: the weights stay (see above)
      if (r >= warmup) weight.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    // Shared by the stage's layers as their weight parts of backward_s
    // (the whole backward in the first stage, which sends no gradient).
    const auto [first, last] = ranges[s];
    std::vector<double> share;
    double sum = 0;
    for (int l = first; l <= last; ++l) {
      const auto& lp = p.layers[static_cast<size_t>(l)];
      const double input = first == 0                 ? 0.0
                           : lp.backward_input_s >= 0 ? lp.backward_input_s
                                                      : 0.5 * lp.backward_s;
      share.push_back(std::max(0.0, lp.backward_s - input));
      sum += share.back();
    }
    const double total = median(weight);
    for (int l = first; l <= last; ++l) {
      const double part = share[static_cast<size_t>(l - first)];
      p.layers[static_cast<size_t>(l)].backward_weight_step_s =
          sum > 0 ? total * part / sum : total / (last - first + 1);
    }
  }
}

void scale_profile(partitioner::Profile& p, int factor) {
  p.batch *= factor;
  for (auto& l : p.layers) {
    l.forward_s *= factor;
    l.backward_s *= factor;
    if (l.backward_input_s > 0) l.backward_input_s *= factor;
    l.output_bytes *= factor;
    l.cut_bytes *= factor;
    l.cut_stash_bytes *= factor;
    l.carry_bytes *= factor;
    l.input_bytes *= factor;
  }
  for (auto& t : p.weight_reads) t.bytes *= factor;
}

}  // namespace pipetrain::exec
