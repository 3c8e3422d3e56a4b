// Static shapes and the helpers every shape rule and kernel needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain::ir {

using Shape = std::vector<int64_t>;

/// Number of elements (1 for a scalar).
int64_t numel(const Shape& s);
/// "(2, 3, 4)" for messages and dumps; "()" for a scalar.
std::string shape_str(const Shape& s);
/// Numpy broadcast of two shapes; throws ModelError naming both when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);
/// Row-major strides in elements.
std::vector<int64_t> strides_of(const Shape& s);
/// Normalises a possibly negative axis against rank; throws ModelError when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank);

}  // namespace pipetrain::ir
