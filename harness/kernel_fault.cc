#include "harness/kernel_fault.h"

#include "harness/error.h"

namespace sextant {

const KernelFaultInfo& kernel_fault_info(KernelFault fault) {
  for (const KernelFaultInfo& info : kernel_faults())
    if (info.fault == fault) return info;
  throw RuntimeError("no kernel fault " + std::to_string(static_cast<int>(fault)));
}

std::optional<KernelFault> find_kernel_fault(const std::string& name) {
  for (const KernelFaultInfo& info : kernel_faults())
    if (name == info.name) return info.fault;
  return std::nullopt;
}

PlantedKernelFault::PlantedKernelFault(KernelFault fault) {
  if (fault != KernelFault::none && detail::planted_kernel_fault.load() != KernelFault::none)
    throw RuntimeError("a kernel fault is already planted");
  detail::planted_kernel_fault.store(fault);
}

PlantedKernelFault::~PlantedKernelFault() { detail::planted_kernel_fault.store(KernelFault::none); }

}  // namespace sextant
