// The import-time evaluator behind constant folding: small reference
// implementations of the ops that appear in exported shape arithmetic. The
// importer must not depend on the executor, so these are its own. Each
// returns nullopt (never throws) when the node is malformed or outside what
// folding handles; the op's shape rule then reports or the kernel runs it.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace pipetrain::importer::detail::fold {

using Inputs = std::vector<const ir::Tensor*>;  // nullptr for an absent optional input
using Result = std::optional<ir::Tensor>;

/// Folded outputs stay small: a constant is stored in the graph (and in an
/// exported model), while a large broadcast is cheaper to recompute.
constexpr int64_t kMaxFoldBytes = int64_t{1} << 24;

/// Allocates the output, or nullopt if it would exceed kMaxFoldBytes.
Result make(ir::DType dtype, const ir::Shape& shape);
/// f32, i64, i32 and bool: the dtypes the arithmetic folds handle.
bool arithmetic_dtype(ir::DType t);
/// Element i as int64 / double (any arithmetic dtype).
int64_t get_int(const ir::Tensor& t, int64_t i);
double get_real(const ir::Tensor& t, int64_t i);
/// Numpy broadcast of several shapes; nullopt when incompatible.
std::optional<ir::Shape> broadcast(const std::vector<ir::Shape>& shapes);
/// For each output element (row-major), the flat index in an input of shape
/// `in` broadcast to `out`.
std::vector<int64_t> broadcast_offsets(const ir::Shape& in, const ir::Shape& out);
/// Axis in [-rank, rank) normalised to [0, rank); nullopt when out of range.
std::optional<int64_t> axis_in(int64_t axis, int64_t rank);
/// An integer list from an i64/i32 input or, when the input is absent, the
/// attribute `key` of `n`; nullopt when neither exists or the input is not integer.
std::optional<std::vector<int64_t>> ints_from(const ir::Node& n, const Inputs& in, size_t i,
                                              const std::string& key);

// Data movement (constant_folding.cc): dtype-agnostic, byte copies.
Result reshape(const ir::Node& n, const Inputs& in);
Result unsqueeze(const ir::Node& n, const Inputs& in);
Result squeeze(const ir::Node& n, const Inputs& in);
Result gather(const ir::Node& n, const Inputs& in);
Result concat(const ir::Node& n, const Inputs& in);
Result slice(const Inputs& in);
Result expand(const Inputs& in);
Result transpose(const ir::Node& n, const Inputs& in);

// Arithmetic and constructors (fold_math.cc).
Result binary(const std::string& op, const Inputs& in);
Result unary(const std::string& op, const Inputs& in);
Result where(const Inputs& in);
Result cast(const ir::Node& n, const Inputs& in);
Result constant_of_shape(const ir::Node& n, const Inputs& in);
Result range(const Inputs& in);

}  // namespace pipetrain::importer::detail::fold
