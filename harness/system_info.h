// The system description of a run, after MLPerf Training's system
// description JSON (mlcommons/training_results_*/*/systems/*.json:
// accelerator model and count, host processors and memory, interconnect,
// software versions): what a reader needs to know which machine produced
// the numbers.
//
// Each node describes itself from its first rank: host name, CPU model,
// sockets, cores, memory; network interfaces from sysfs (/sys/class/net,
// /sys/class/infiniband) and the verbs devices where libibverbs is present;
// GPUs through NVML (libnvidia-ml, opened at run time): model, count,
// memory, driver and CUDA driver versions and the GPU-to-GPU interconnect
// matrix as `nvidia-smi topo -m` prints it (NV<n>/NVSwitch, or the PCIe
// path PIX/PXB/PHB/NODE/SYS); cuDNN and NCCL versions where their libraries
// load. A library that is absent is recorded as unavailable with the
// reason, never guessed.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/comm.h"
#include "harness/device.h"
#include "harness/topology.h"

namespace sextant {

// This node, read locally (no communication).
nlohmann::json describe_this_node();

// Collective over world: one description per node (from the node's first
// rank), in node order, and the rank layout: node of every rank, ranks per
// node. Complete on every rank.
nlohmann::json describe_nodes(Communicator& world, const NodeMap& nodes);
// MLPerf-style headline of describe_nodes' result: nodes, host processor and
// memory, accelerator model and counts, GPU interconnect, network links.
nlohmann::json system_summary(const nlohmann::json& topology, Device device);

// Parts, exposed for tests: a sysfs tree rooted elsewhere than "/".
nlohmann::json network_interfaces(const std::string& sysfs_root = "/sys");
nlohmann::json infiniband_devices(const std::string& sysfs_root = "/sys");
nlohmann::json nvml_gpus();         // {"available": false, "reason": ...} without NVML
nlohmann::json library_versions();  // cudnn, nccl (runtime-loaded), ibverbs

}  // namespace sextant
