// NumPy .npz archives: a zip of .npy entries, stored (np.savez) or deflated
// (np.savez_compressed), zip64 included.
#pragma once

#include <map>
#include <string>

#include "ir/tensor.h"

namespace pipetrain::data {

/// Every .npy entry of the archive, keyed by its name without ".npy". Throws ModelError naming
/// the file (and the entry) on a missing file, a damaged archive, a bad CRC or a bad .npy.
std::map<std::string, ir::Tensor> read_npz(const std::string& path);

}  // namespace pipetrain::data
