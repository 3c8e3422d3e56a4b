// NumPy .npy files: the CLI's tensor exchange format.
#pragma once

#include <istream>
#include <string>

#include "ir/tensor.h"

namespace pipetrain::ir {

/// Reads a little-endian, C-order .npy of f32, f16, i64, i32 or bool; u8, i8,
/// u16, i16 and u32 arrays (token ids, raw images) are widened to i64 and f64
/// narrowed to f32. Throws ModelError naming the file on anything else.
Tensor load_npy(const std::string& path);
/// The same from a stream (e.g. an entry of an .npz); `what` names it in errors.
Tensor read_npy(std::istream& f, const std::string& what);
/// Writes atomically (temporary file, then rename).
void save_npy(const Tensor& t, const std::string& path);

}  // namespace pipetrain::ir
