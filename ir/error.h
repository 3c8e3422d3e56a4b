// Typed errors for the whole library. Boundaries (importer, builders, CLI)
// throw these with the node, op and shapes in the message; kernels assert.
#pragma once

#include <stdexcept>
#include <string>

namespace pipetrain {

/// Base of every error pipetrain reports to a user.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The model itself is wrong: malformed file, bad shapes, missing bindings.
class ModelError : public Error {
 public:
  using Error::Error;
};

/// An op (or an op with these attributes or dtypes) pipetrain does not support.
class UnsupportedOp : public ModelError {
 public:
  using ModelError::ModelError;
};

/// A plan that does not fit the model or the topology.
class PlanError : public Error {
 public:
  using Error::Error;
};

/// Something failed while running (a worker, a kernel, a NaN).
class RuntimeFault : public Error {
 public:
  using Error::Error;
};

}  // namespace pipetrain
