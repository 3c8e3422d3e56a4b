#include "autodiff/grad_builder.h"

namespace pipetrain::autodiff {

const std::map<std::string, RuleEntry>& rule_registry() {
  static const std::map<std::string, RuleEntry> registry = [] {
    std::map<std::string, RuleEntry> r;
    register_elementwise_rules(r);
    register_activation_rules(r);
    register_linalg_rules(r);
    register_conv_pool_rules(r);
    register_norm_loss_rules(r);
    register_shape_rules(r);
    register_index_rules(r);
    register_rnn_rules(r);
    return r;
  }();
  return registry;
}

}  // namespace pipetrain::autodiff
