#include "harness/system_info.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

namespace sextant {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

// A sysfs tree with one physical NIC, one virtual one and an InfiniBand HCA.
fs::path fake_sysfs() {
  const fs::path root = fs::temp_directory_path() / ("sextant-sysfs-" + std::to_string(::getpid()));
  fs::remove_all(root);
  write(root / "class/net/lo/operstate", "unknown");
  write(root / "class/net/ens1/operstate", "up");
  write(root / "class/net/ens1/speed", "100000");
  write(root / "class/net/ens1/mtu", "9000");
  write(root / "drivers/mlx5_core/x", "");
  fs::create_directories(root / "class/net/ens1/device");
  fs::create_directory_symlink(root / "drivers/mlx5_core", root / "class/net/ens1/device/driver");
  write(root / "class/net/veth0/operstate", "up");
  write(root / "class/net/veth0/speed", "-1");
  write(root / "class/infiniband/mlx5_0/node_type", "1: CA");
  write(root / "class/infiniband/mlx5_0/fw_ver", "28.39.1002");
  write(root / "class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
  write(root / "class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)");
  write(root / "class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand");
  return root;
}

TEST(SystemInfo, NetworkInterfacesFromSysfs) {
  const fs::path root = fake_sysfs();
  const nlohmann::json nics = network_interfaces(root.string());
  ASSERT_EQ(nics.size(), 2u);  // lo is left out
  EXPECT_EQ(nics[0]["name"], "ens1");
  EXPECT_EQ(nics[0]["speed_mbps"], 100000);
  EXPECT_EQ(nics[0]["mtu"], 9000);
  EXPECT_EQ(nics[0]["driver"], "mlx5_core");
  EXPECT_TRUE(nics[0]["physical"].get<bool>());
  EXPECT_EQ(nics[1]["name"], "veth0");
  EXPECT_FALSE(nics[1].contains("speed_mbps"));  // -1: no speed reported
  EXPECT_FALSE(nics[1]["physical"].get<bool>());

  const nlohmann::json ib = infiniband_devices(root.string());
  ASSERT_EQ(ib.size(), 1u);
  EXPECT_EQ(ib[0]["name"], "mlx5_0");
  EXPECT_EQ(ib[0]["ports"][0]["rate"], "400 Gb/sec (4X NDR)");
  EXPECT_EQ(ib[0]["ports"][0]["link_layer"], "InfiniBand");
  fs::remove_all(root);
}

TEST(SystemInfo, MissingSysfsIsEmpty) {
  EXPECT_TRUE(network_interfaces("/nonexistent").empty());
  EXPECT_TRUE(infiniband_devices("/nonexistent").empty());
}

// Without NVML (this machine, or any CPU node) the GPUs are recorded as
// unavailable with a reason, never guessed; with it, a matrix per GPU pair.
TEST(SystemInfo, GpusAvailableOrSaysWhyNot) {
  const nlohmann::json gpus = nvml_gpus();
  if (!gpus["available"].get<bool>()) {
    EXPECT_FALSE(gpus["reason"].get<std::string>().empty());
    return;
  }
  const size_t n = gpus["count"].get<size_t>();
  ASSERT_EQ(gpus["interconnect"].size(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(gpus["interconnect"][i][i], "X");
}

TEST(SystemInfo, LibrariesNamedEvenWhenAbsent) {
  const nlohmann::json libs = library_versions();
  for (const char* key : {"cudnn", "nccl", "ibverbs_devices"}) EXPECT_TRUE(libs.contains(key)) << key;
}

TEST(SystemInfo, SummaryOfTwoNodes) {
  nlohmann::json node = describe_this_node();
  node["gpus"] = {{"available", true},
                  {"count", 2},
                  {"gpus", {{{"index", 0}, {"name", "NVIDIA H200"}}, {{"index", 1}, {"name", "NVIDIA H200"}}}},
                  {"interconnect", {{"X", "NVSwitch"}, {"NVSwitch", "X"}}}};
  nlohmann::json other = node;
  other["host"] = "other";
  const nlohmann::json topology = {{"nodes", {node, other}}, {"node_of_rank", {0, 0, 1, 1}}};
  const nlohmann::json s = system_summary(topology, Device::cuda);
  EXPECT_EQ(s["nodes"], 2);
  EXPECT_EQ(s["accelerator"], "NVIDIA H200");
  EXPECT_EQ(s["accelerators_per_node"], 2);
  EXPECT_EQ(s["accelerators_total"], 4);
  EXPECT_EQ(s["gpu_interconnect"], "NVSwitch");
  EXPECT_FALSE(s.contains("heterogeneous"));
  other["cpu"]["model"] = "another CPU";
  EXPECT_EQ(system_summary({{"nodes", {node, other}}}, Device::cuda)["heterogeneous"], "nodes differ in CPU models");
}

}  // namespace
}  // namespace sextant
