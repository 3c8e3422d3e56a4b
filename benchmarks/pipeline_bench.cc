// Pipelined training against one worker and against the simulator, side by
// side in one run: the same model and minibatch trained by a plain Trainer on
// one thread, then by a time-balanced pipeline (one thread per worker) under
// each schedule the executor runs, with the simulator's prediction for the
// same plan from a profile measured just before each timed round, and each
// schedule's stashes.
//
//   build/benchmarks/pipeline_bench                      # the balanced MLP
//   build/benchmarks/pipeline_bench --model lenet --batch 64
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>

#include "autodiff/training_graph.h"
#include "executor/backend.h"
#include "executor/measured_profile.h"
#include "executor/pipeline/pipeline.h"
#include "executor/trainer.h"
#include "importer/importer.h"
#include "models/zoo.h"
#include "partitioner/baselines.h"
#include "partitioner/simulator.h"

namespace pt = pipetrain;

namespace {

using Clock = std::chrono::steady_clock;
using pt::partitioner::ScheduleKind;

struct Args {
  std::string model = "mlp";
  int64_t batch = 128;
  int stages = 2;
  int microbatches = 8;
  int steps = 48;
  int threads = 1;
  int64_t width = 1024;
  int depth = 8;
  int trials = 3;
  std::string schedules = "all";  // or a comma list of the rows' names (+bw rows come along)
  std::string pin = "auto";  // workers on cores of their own: auto, on, off, or both (on and off)
};

pt::ir::Graph load(const Args& a, int64_t batch) {
  pt::models::ZooOptions o;
  o.batch = batch;
  o.seed = 1;
  if (a.model == "mlp") {
    o.in_features = a.width;
    o.hidden.assign(static_cast<size_t>(a.depth), a.width);
  }
  if (a.model.size() > 5 && a.model.substr(a.model.size() - 5) == ".onnx") {
    pt::importer::ImportOptions io;
    io.batch = batch;
    return pt::importer::import_model(a.model, io);
  }
  auto proto = pt::models::build_zoo_model(a.model, o);
  return pt::importer::import_model_bytes(proto.SerializeAsString(), ".", {});
}

// Random features and labels in [0, classes) for a training graph.
pt::exec::TensorMap random_batch(const pt::autodiff::TrainingGraph& tg, int64_t classes,
                                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  pt::exec::TensorMap m;
  for (const auto& in : tg.graph.inputs) {
    const auto& d = tg.graph.tensor(in);
    pt::ir::Tensor t(d.dtype, d.shape);
    if (d.dtype == pt::ir::DType::kF32) {
      std::normal_distribution<float> n;
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
    } else {
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<int64_t>()[i] = static_cast<int64_t>(rng() % static_cast<uint64_t>(classes));
    }
    m[in] = t;
  }
  return m;
}

int64_t classes_of(const pt::autodiff::TrainingGraph& tg) {
  return tg.graph.tensor(tg.prediction).shape.back();
}

// The single worker: a plain Trainer on the whole minibatch.
struct SingleWorker {
  pt::ir::Graph model;
  pt::autodiff::TrainingGraph tg;
  std::unique_ptr<pt::exec::Backend> backend = pt::exec::make_cpu_backend();
  std::unique_ptr<pt::exec::Trainer> trainer;
  pt::exec::TensorMap feeds;

  explicit SingleWorker(const Args& a) : model(load(a, a.batch)) {
    tg = pt::autodiff::build_training_graph(model, {"cross-entropy", ""});
    pt::exec::TrainerOptions to;
    to.optimizer.lr = 0.01;
    to.optimizer.momentum = 0.9;
    trainer = std::make_unique<pt::exec::Trainer>(tg, *backend, to);
    feeds = random_batch(tg, classes_of(tg), 0);
    for (int i = 0; i < 3; ++i) trainer->step(feeds);
  }
  double samples_per_s(const Args& a) {
    auto t0 = Clock::now();
    for (int i = 0; i < a.steps; ++i) trainer->step(feeds);
    return a.batch * a.steps / std::chrono::duration<double>(Clock::now() - t0).count();
  }
};

using OpKindInt = int;      // partitioner::OpKind as an int: F 0, B 1, Recv 5, Step 7
constexpr int kChunks = 2;  // interleaved (and zb-v): virtual stages per worker

bool chunked(ScheduleKind k) {
  return k == ScheduleKind::kInterleaved || pt::partitioner::v_shaped(k);
}

// One schedule's pipeline, its prediction and what its timed rounds measured.
struct Pipelined {
  ScheduleKind kind;
  bool batched = false;  // gpipe, 1f1b-flush: weight gradients once per step (WeightGradients)
  pt::exec::PinWorkers pin = pt::exec::PinWorkers::kAuto;  // PipelineOptions::pin_workers
  int m = 1;                                               // microbatches per step
  pt::ir::Graph model, step_model;
  pt::autodiff::TrainingGraph tg, step_tg;  // at the microbatch and at the minibatch size
  pt::partitioner::Profile profile;         // of the graph the workers run, per minibatch
  double predicted = 0;                     // the simulator's samples/s (the latest profile's)
  pt::exec::OptimizerConfig optimizer;
  pt::partitioner::SimOptions so;
  std::vector<std::pair<int, int>> ranges;  // each stage's layers
  std::map<std::string, pt::ir::Tensor> feeds, step_feeds;
  std::unique_ptr<pt::exec::Pipeline> pipe;
  std::vector<pt::exec::TensorMap> round;
  int steps_per_round = 1;
  std::map<std::pair<int, int>, double> op_s;  // (worker's stage, kind) -> seconds, all trials
  int steps_timed = 0;
  double busy_s = 0, worker_s = 0;  // compute time, workers x wall time (timed rounds)

  pt::partitioner::Plan plan;  // interleaved: the virtual stages

  Pipelined(const Args& a, ScheduleKind k, const pt::partitioner::Plan& stage_plan,
            bool batched_weights, pt::exec::PinWorkers pin_workers)
      : kind(k),
        batched(batched_weights),
        pin(pin_workers),
        m(k == ScheduleKind::kPipeDream ? 1 : a.microbatches),
        model(load(a, a.batch / m)),
        plan(stage_plan) {
    tg = pt::autodiff::build_training_graph(model, {"cross-entropy", ""});
    if (batched) {
      step_model = load(a, a.batch);
      step_tg = pt::autodiff::build_training_graph(step_model, {"cross-entropy", ""});
    }
    std::vector<pt::exec::PipelineStage> stages;
    for (const auto& st : plan.stages)
      stages.push_back({st.first_layer, st.last_layer, st.replication});
    pt::exec::PipelineOptions po;
    po.schedule = kind;
    po.microbatches = m;
    po.optimizer.lr = 0.01;
    po.optimizer.momentum = 0.9;
    po.threads_per_worker = a.threads;
    po.chunks = kChunks;
    po.pin_workers = pin;
    if (batched) {
      po.weight_gradients = pt::exec::WeightGradients::kBatched;
      po.step_graph = &step_tg;
    }
    const int64_t classes = classes_of(tg);
    optimizer = po.optimizer;
    feeds = random_batch(tg, classes, 0);
    if (batched) step_feeds = random_batch(step_tg, classes, 0);
    for (const auto& st : plan.stages) ranges.emplace_back(st.first_layer, st.last_layer);
    measure_profile(a);
    so.overlap_allreduce = kind != ScheduleKind::kTwoBW;  // as the executor runs it
    so.microbatches = kind == ScheduleKind::kPipeDream ? a.steps : m;
    so.chunks = kChunks;
    // Batched: on the stages where the simulator finds it faster.
    // (Whatever their memory: the rows show what batching can gain.)
    if (batched)
      so.batched_weights = pt::partitioner::best_batched_weights(
          plan, profile, kind, so, std::numeric_limits<double>::infinity());
    po.batched_stages = so.batched_weights;
    if (batched && so.batched_weights.empty())
      po.weight_gradients = pt::exec::WeightGradients::kPerMicrobatch;
    predicted = simulate(a);
    pipe = std::make_unique<pt::exec::Pipeline>(tg, stages, po);
    // A round: one step (flush), `steps` minibatches (pipedream), or a
    // quarter of `steps` steps of m microbatches (2bw).
    steps_per_round = kind == ScheduleKind::kPipeDream ? a.steps
                      : kind == ScheduleKind::kTwoBW   ? std::max(1, a.steps / 4)
                                                       : 1;
    for (int i = 0; i < steps_per_round * m; ++i) round.push_back(random_batch(tg, classes, i));
    pipe->run(round);  // warm-up
  }

  // The simulator's input: a profile of the graph the workers run (one
  // microbatch, optimizer update included), stated per minibatch. Then each
  // stage's share as its own program runs it, beside the other workers
  // (what `pipetrain train` predicts from; medians of 15: with 7 one stage
  // of one schedule came out twice its time).
  void measure_profile(const Args& a) {
    profile = pt::exec::measure_training_profile(tg, feeds, 2, 7, &optimizer, a.stages - 1);
    profile =
        pt::exec::calibrate_to_stages(std::move(profile), tg, ranges, feeds, optimizer, 3, 15,
                                      a.stages - 1, {}, pt::partitioner::splits_backward(kind));
    // Batched: each stage's weight half timed once at the minibatch size.
    if (batched)
      pt::exec::measure_weight_steps(profile, step_tg, ranges, step_feeds, optimizer, 3, 15,
                                     a.stages - 1);
    pt::exec::scale_profile(profile, m);
  }

  double simulate(const Args& a) const {
    auto [sim_plan, sim_profile] =
        chunked(kind) ? pt::partitioner::interleaved_worker_view(plan, profile, a.stages, kind)
                      : std::make_pair(plan, profile);
    return pt::partitioner::simulate(sim_plan, sim_profile, kind, so).samples_per_s;
  }

  /// The prediction from a profile measured now, just before a timed round:
  /// on a shared VM whose speed drifts by 10-30% over minutes, a profile
  /// taken once, minutes before the rounds, moved meas/pred by as much
  /// (gpipe's prediction 1261-1879 samples/s over four runs whose measured
  /// rate stayed within 1839-1899).
  double predict_now(const Args& a) {
    measure_profile(a);
    predicted = simulate(a);
    return predicted;
  }

  double samples_per_s(const Args& a) {
    double seconds = 0;
    int done = 0;
    while (done < a.steps) {
      auto r = pipe->run(round);
      seconds += r.seconds;
      done += steps_per_round;
      for (double b : r.busy_s) busy_s += b;
      worker_s += r.seconds * static_cast<double>(r.busy_s.size());
      // Per stage that ran it: a Recv names the sending stage.
      for (const auto& t : r.ops) {
        const bool recv = t.op.kind == pt::partitioner::OpKind::kRecv;
        const bool act = t.op.payload == pt::partitioner::Payload::kActivation;
        const int stage = recv ? t.op.stage + (act ? 1 : -1) : t.op.stage;
        op_s[{stage, static_cast<int>(t.op.kind)}] += t.end - t.start;
      }
    }
    steps_timed += done;
    return a.batch * done / seconds;
  }

  /// 1 - compute / (workers x wall time) over every timed round.
  double bubble() const { return worker_s > 0 ? 1 - busy_s / worker_s : 0; }

  // Per stage, ms per minibatch: measured (the profile's figure).
  std::string breakdown() {
    std::string out;
    if (batched) {
      std::string which;
      const auto& b = pipe->batched_stages();
      for (size_t s = 0; s < b.size(); ++s)
        if (b[s]) which += (which.empty() ? "" : ", ") + std::to_string(s);
      out += " batched on stages " + (which.empty() ? std::string("none") : which) + ";";
    }
    for (size_t s = 0; s < plan.stages.size(); ++s) {
      double f = 0, b = 0, u = 0;
      for (int l = plan.stages[s].first_layer; l <= plan.stages[s].last_layer; ++l) {
        f += profile.layers[static_cast<size_t>(l)].forward_s;
        b += profile.layers[static_cast<size_t>(l)].backward_s;
        u += profile.layers[static_cast<size_t>(l)].update_s;
      }
      auto per = [&](OpKindInt k) { return op_s[{static_cast<int>(s), k}] / steps_timed * 1e3; };
      // Split backward (zb-h1): its input and weight halves, together.
      out += fmt::format(
          "  s{}: F {:.1f} ({:.1f}) B {:.1f} ({:.1f}) step {:.1f} ({:.1f}) wait {:.1f}", s, per(0),
          f * 1e3, per(1) + per(2) + per(3), b * 1e3, per(7), u * 1e3, per(5));
    }
    return out;
  }
};

// The rows' names: the partitioner's, but PipeDream's asynchronous 1F1B is
// "1f1b" and PipeDream-Flush "1f1b-flush", as `pipetrain train --schedule` names them.
std::string row_name(ScheduleKind k) {
  return k == ScheduleKind::kPipeDream  ? "1f1b"
         : k == ScheduleKind::kOneFOneB ? "1f1b-flush"
                                        : pt::partitioner::schedule_name(k);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Pipelined training throughput against one worker and the simulator"};
  Args a;
  app.add_option("--model", a.model, "Zoo model name or an .onnx file")->capture_default_str();
  app.add_option("--batch", a.batch, "Minibatch")->capture_default_str();
  app.add_option("--stages", a.stages, "Pipeline stages (one worker each)")->capture_default_str();
  app.add_option("--microbatches", a.microbatches, "Per step: gpipe, 1f1b-flush, 2bw")
      ->capture_default_str();
  app.add_option("--steps", a.steps, "Timed optimizer steps per schedule")->capture_default_str();
  app.add_option("--threads", a.threads, "Threads per worker (and of the single worker)")
      ->capture_default_str();
  app.add_option("--width", a.width, "mlp: width of every layer")->capture_default_str();
  app.add_option("--depth", a.depth, "mlp: hidden layers")->capture_default_str();
  app.add_option("--trials", a.trials, "Interleaved trials (medians are printed)")
      ->capture_default_str();
  app.add_option(
         "--schedules", a.schedules,
         "Rows to run: all, or a comma list of gpipe, 1f1b-flush, zb-h1, zb-h2, zb-v, dualpipev, "
         "v-half, interleaved, "
         "1f1b, 2bw (gpipe and 1f1b-flush bring their +bw rows)")
      ->capture_default_str();
  app.add_option("--pin", a.pin,
                 "Workers on cores of their own: auto (as train runs), on, off (floating), or "
                 "both (every schedule on and off, side by side)")
      ->check(CLI::IsMember({"auto", "on", "off", "both"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    pt::exec::set_cpu_threads(a.threads);
    pt::ir::Graph model = load(a, a.batch);
    auto tg = pt::autodiff::build_training_graph(model, {"cross-entropy", ""});
    auto profile =
        pt::exec::measure_training_profile(tg, random_batch(tg, classes_of(tg), 0), 2, 7);
    auto topo = pt::partitioner::parse_topology(std::to_string(a.stages), "10e9", "");
    auto plan = pt::partitioner::time_balanced_plan(profile, topo);
    std::string cuts;
    for (const auto& st : plan.stages)
      cuts +=
          fmt::format("{}layers {}-{}", cuts.empty() ? "" : " | ", st.first_layer, st.last_layer);
    fmt::print(
        "pipeline benchmark: {}, minibatch {}, {} stages by measured time ({}), {} thread{} "
        "per worker\n",
        a.model == "mlp" ? fmt::format("mlp {} x {}", a.depth, a.width) : a.model, a.batch,
        plan.stages.size(), cuts, a.threads, a.threads > 1 ? "s" : "");
    SingleWorker single(a);
    std::vector<ScheduleKind> kinds;
    for (ScheduleKind k :
         {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1,
          ScheduleKind::kZeroBubbleH2, ScheduleKind::kZeroBubbleV, ScheduleKind::kDualPipeV,
          ScheduleKind::kVHalf, ScheduleKind::kInterleaved, ScheduleKind::kPipeDream,
          ScheduleKind::kTwoBW})
      if (a.schedules == "all" ||
          ("," + a.schedules + ",").find("," + row_name(k) + ",") != std::string::npos)
        kinds.push_back(k);
    if (kinds.empty())
      throw std::runtime_error(
          "--schedules '" + a.schedules +
          "' names none of gpipe, 1f1b-flush, zb-h1, zb-h2, zb-v, dualpipev, v-half, interleaved, "
          "1f1b, "
          "2bw");
    // Interleaved and the V's: stages x kChunks virtual stages, balanced the same way.
    auto virtual_topo =
        pt::partitioner::parse_topology(std::to_string(a.stages * kChunks), "10e9", "");
    const auto virtual_plan = pt::partitioner::time_balanced_plan(profile, virtual_topo);
    std::vector<std::unique_ptr<Pipelined>> runs;
    std::vector<pt::exec::PinWorkers> pins;
    if (a.pin == "both")
      pins = {pt::exec::PinWorkers::kOn, pt::exec::PinWorkers::kOff};
    else
      pins = {pt::exec::parse_pin_workers(a.pin)};
    for (ScheduleKind k : kinds)
      for (pt::exec::PinWorkers pin : pins) {
        runs.push_back(
            std::make_unique<Pipelined>(a, k, chunked(k) ? virtual_plan : plan, false, pin));
        if (k == ScheduleKind::kGPipe || k == ScheduleKind::kOneFOneB)
          runs.push_back(std::make_unique<Pipelined>(a, k, plan, /*batched_weights=*/true, pin));
      }
    // Trials interleave the single worker and every schedule, so drift on a
    // shared machine hits all of them alike; each ratio is taken within a
    // trial and the median over trials is printed.
    // Each trial re-measures a schedule's profile right before timing it,
    // so meas/pred compares the two at one moment (the median over trials).
    std::vector<double> one;
    std::vector<std::vector<double>> rate(runs.size()), ratio(runs.size()), pred(runs.size()),
        vs_pred(runs.size());
    for (int t = 0; t < a.trials; ++t) {
      one.push_back(single.samples_per_s(a));
      for (size_t i = 0; i < runs.size(); ++i) {
        pred[i].push_back(runs[i]->predict_now(a));
        rate[i].push_back(runs[i]->samples_per_s(a));
        ratio[i].push_back(rate[i].back() / one.back());
        vs_pred[i].push_back(rate[i].back() / pred[i].back());
      }
    }
    fmt::print("one worker ({} thread{}): {:.0f} samples/s (median of {} trials)\n\n", a.threads,
               a.threads > 1 ? "s" : "", median(one), a.trials);
    const int w = a.pin == "both" ? 19 : 13;  // the schedule column ("1f1b-flush+bw float")
    fmt::print("{:<{}} {:>10} {:>11} {:>10} {:>9} {:>7} {:>9}  {}\n", "schedule", w, "samples/s",
               "x 1 worker", "predicted", "meas/pred", "bubble", "peak MiB",
               "per stage: microbatches in flight, weight versions, peak stash MiB");
    for (size_t i = 0; i < runs.size(); ++i) {
      auto& r = *runs[i];
      // Peak memory of the busiest worker: its stashed activations and its
      // weight versions (optimizer state and gradients come on top, alike
      // for every schedule).
      std::string per;
      double peak = 0;
      for (const auto& st : r.pipe->stats()) {
        per += fmt::format("  s{}: {}, {}, {:.1f}", st.stage, st.peak_in_flight,
                           st.peak_weight_versions, st.peak_stash_bytes / 1048576.0);
        double params = 0;  // over the worker's stages (its chunks when interleaved)
        const int chunks = chunked(r.kind) ? kChunks : 1;
        for (int c = 0; c < chunks; ++c) {
          const size_t vs =
              chunks > 1
                  ? static_cast<size_t>(pt::partitioner::chunk_stage(r.kind, st.stage, c, a.stages))
                  : static_cast<size_t>(st.stage);
          for (int l = r.plan.stages[vs].first_layer; l <= r.plan.stages[vs].last_layer; ++l)
            params += static_cast<double>(r.profile.layers[static_cast<size_t>(l)].param_bytes);
        }
        peak = std::max(
            peak, (static_cast<double>(st.peak_stash_bytes) + st.peak_weight_versions * params) /
                      1048576.0);
      }
      const std::string name = row_name(r.kind) + (r.batched ? "+bw" : "") +
                               (a.pin == "both" && r.pipe->worker_cores().empty() ? " float" : "");
      const double measured = median(rate[i]);
      fmt::print("{:<{}} {:>10.0f} {:>11.2f} {:>10.0f} {:>9.2f} {:>6.1f}% {:>9.1f} {}\n", name, w,
                 measured, median(ratio[i]), median(pred[i]), median(vs_pred[i]), 100 * r.bubble(),
                 peak, per);
      fmt::print("{:<{}} ms per minibatch, measured (profile):{}\n", "", w, r.breakdown());
    }
    fmt::print(
        "\n1f1b = PipeDream's asynchronous 1F1B with weight stashing; flush schedules and "
        "2bw cut the minibatch into {} microbatches; interleaved and zb-v run {} chunks per "
        "worker; "
        "+bw: batched weight gradients (per microbatch only the input gradients, then each "
        "stage's weight gradients once per step at the minibatch size){}\n",
        a.microbatches, kChunks,
        a.pin == "both"  ? "; float: the same schedule with its workers unpinned (floating)"
        : a.pin == "off" ? "; workers unpinned (floating)"
                         : "");
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
