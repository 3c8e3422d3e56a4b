#include "importer/checkpoint_files.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <vector>

#include "ir/error.h"

namespace pipetrain::importer {

namespace fs = std::filesystem;

namespace {

// The rotated files beside `path`, newest step first.
std::vector<std::pair<int64_t, std::string>> rotated_files(const std::string& path) {
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::regex name(
      std::regex_replace(p.stem().string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
      R"(\.step(\d+))" +
      std::regex_replace(p.extension().string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)"));
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (std::regex_match(f, m, name)) out.emplace_back(std::stoll(m[1]), e.path().string());
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

}  // namespace

std::string rotated_checkpoint_path(const std::string& path, int64_t step) {
  const fs::path p(path);
  return (p.parent_path() /
          (p.stem().string() + ".step" + std::to_string(step) + p.extension().string()))
      .string();
}

CheckpointWriter::CheckpointWriter(std::string path, int keep)
    : path_(std::move(path)), keep_(std::max(1, keep)) {}

CheckpointWriter::~CheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::wait_locked(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [&] { return !busy_; });
  if (thread_.joinable()) {
    lock.unlock();
    thread_.join();
    lock.lock();
  }
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void CheckpointWriter::submit(Checkpoint c, int64_t step) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock);
  busy_ = true;
  thread_ = std::thread([this, c = std::move(c), step] {
    std::exception_ptr error;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      write(c, step);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> guard(mu_);
    write_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!error) ++written_;
    error_ = error;
    busy_ = false;
    cv_.notify_all();
  });
}

void CheckpointWriter::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock);
}

void CheckpointWriter::write(const Checkpoint& c, int64_t step) {
  if (keep_ == 1) return write_checkpoint(c, path_);
  const std::string rotated = rotated_checkpoint_path(path_, step);
  write_checkpoint(c, rotated);
  // `path` names the newest: a hard link renamed into place (atomic, no copy).
  const std::string tmp = path_ + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_hard_link(rotated, tmp, ec);
  if (!ec) fs::rename(tmp, path_, ec);
  if (ec) {
    fs::remove(tmp, ec);
    write_checkpoint(c, path_);  // a file system without links: a second copy
  }
  const auto files = rotated_files(path_);
  for (size_t i = static_cast<size_t>(keep_); i < files.size(); ++i)
    fs::remove(files[i].second, ec);
}

std::optional<FoundCheckpoint> latest_checkpoint(
    const std::string& path, const std::function<void(const std::string&)>& warn) {
  // The path names the newest unless a write stopped between its two names:
  // rotated files newer than it come first.
  std::vector<std::pair<int64_t, std::string>> order;
  std::optional<FoundCheckpoint> main;
  std::string main_error;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    try {
      main = FoundCheckpoint{load_checkpoint(path), path};
    } catch (const ModelError& e) {
      main_error = e.what();
    }
  }
  const int64_t main_step = main && main->checkpoint.meta.count("step")
                                ? std::stoll(main->checkpoint.meta.at("step"))
                                : -1;
  const auto rotated = rotated_files(path);
  std::vector<std::string> failures;
  if (!main_error.empty()) {
    warn("skipping " + main_error);
    failures.push_back(main_error);
  }
  for (const auto& [step, file] : rotated) {
    if (main && step <= main_step) break;
    try {
      return FoundCheckpoint{load_checkpoint(file), file};
    } catch (const ModelError& e) {
      warn(std::string("skipping ") + e.what());
      failures.push_back(e.what());
    }
  }
  if (main) return main;
  if (failures.empty()) return std::nullopt;
  throw ModelError("none of the " + std::to_string(failures.size()) + " checkpoint file" +
                   (failures.size() > 1 ? "s" : "") + " at " + path +
                   " or rotated beside it verifies (the warnings above say why)");
}

}  // namespace pipetrain::importer
