// Outputs checked before any work: a run that trains for hours and then
// cannot write its model has lost those hours. Each check makes (and removes)
// a probe file where the output will go, so it proves what a later write
// needs, permissions and read-only mounts included.
#pragma once

#include <string>

#include "cli/train_args.h"

namespace pipetrain::cli {

/// `path` can be written (renamed into place) later: its directory exists and takes a new
/// file, and it is not a directory. ModelError naming `option` and the path otherwise.
void check_output_file(const std::string& option, const std::string& path);

/// `dir` exists (created here when missing) and takes new files; ModelError otherwise.
void check_output_dir(const std::string& option, const std::string& dir);

/// The outputs of `train`: --run-dir, -o, and for pipelined runs the checkpoint.
void check_train_outputs(const TrainArgs& a);

}  // namespace pipetrain::cli
