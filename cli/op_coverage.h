// The operator coverage table `pipetrain inspect --ops` prints.
#pragma once

namespace pipetrain::cli {

void print_op_coverage();

}  // namespace pipetrain::cli
