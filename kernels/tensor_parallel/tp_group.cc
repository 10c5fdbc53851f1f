#include "kernels/tensor_parallel/tp_group.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::tp {

namespace {
struct NamedFault {
  Fault fault;
  const char* name;
};
constexpr NamedFault kFaults[] = {
    {Fault::skip_input_grad_reduce, "skip_input_grad_reduce"},
    {Fault::reduce_scatter_wrong_dim, "reduce_scatter_wrong_dim"},
    {Fault::layernorm_wrong_axis, "layernorm_wrong_axis"},
    {Fault::cross_entropy_local_max, "cross_entropy_local_max"},
};
}  // namespace

const std::vector<std::string>& fault_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const NamedFault& f : kFaults) out.push_back(f.name);
    return out;
  }();
  return names;
}

std::string fault_name(Fault fault) {
  for (const NamedFault& f : kFaults)
    if (f.fault == fault) return f.name;
  return "";
}

Fault parse_fault(const std::string& name) {
  if (name.empty()) return Fault::none;
  for (const NamedFault& f : kFaults)
    if (name == f.name) return f.fault;
  throw RuntimeError(cat("tensor_parallel: unknown fault '", name, "' (known: ", join(fault_names(), ", "), ")"));
}

}  // namespace sextant::tp
