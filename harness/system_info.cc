#include "harness/system_info.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "harness/strings.h"

namespace fs = std::filesystem;

namespace sextant {

namespace {

// The first line of a file, trimmed; "" when it cannot be read (sysfs files
// such as a virtual interface's speed fail to read with EINVAL).
std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t"), end = s.find_last_not_of(" \t\n");
  return begin == std::string::npos ? "" : s.substr(begin, end - begin + 1);
}

nlohmann::json cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown";
  std::set<std::string> sockets;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "model name") model = value;
    if (key == "physical id") sockets.insert(value);
  }
  return {{"model", model},
          {"sockets", std::max<size_t>(1, sockets.size())},
          {"logical_cores", std::thread::hardware_concurrency()}};
}

double memory_total_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemTotal:") return kib * 1024;
  return 0;
}

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// A shared library opened for the lifetime of the call; null when absent.
struct Library {
  void* handle = nullptr;
  std::string name;
  explicit Library(const std::vector<const char*>& names) {
    for (const char* n : names)
      if ((handle = dlopen(n, RTLD_NOW | RTLD_LOCAL))) {
        name = n;
        return;
      }
  }
  ~Library() {
    if (handle) dlclose(handle);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  template <class F>
  F symbol(const char* s) const {
    return handle ? reinterpret_cast<F>(dlsym(handle, s)) : nullptr;
  }
};

nlohmann::json unavailable(const std::string& reason) { return {{"available", false}, {"reason", reason}}; }

}  // namespace

nlohmann::json network_interfaces(const std::string& sysfs_root) {
  nlohmann::json out = nlohmann::json::array();
  for (const fs::path& dir : entries(fs::path(sysfs_root) / "class/net")) {
    const std::string name = dir.filename().string();
    if (name == "lo") continue;
    nlohmann::json nic = {{"name", name}, {"state", read_line(dir / "operstate")}};
    const std::string speed = read_line(dir / "speed"), mtu = read_line(dir / "mtu");
    // speed is -1 or unreadable where the link reports none (virtual, down)
    if (const long long v = std::atoll(speed.c_str()); v > 0) nic["speed_mbps"] = v;
    if (const long long v = std::atoll(mtu.c_str()); v > 0) nic["mtu"] = v;
    std::error_code ec;
    const fs::path driver = fs::read_symlink(dir / "device/driver", ec);
    nic["driver"] = ec ? "" : driver.filename().string();
    nic["physical"] = fs::exists(dir / "device");
    out.push_back(nic);
  }
  return out;
}

nlohmann::json infiniband_devices(const std::string& sysfs_root) {
  nlohmann::json out = nlohmann::json::array();
  for (const fs::path& dev : entries(fs::path(sysfs_root) / "class/infiniband")) {
    nlohmann::json ports = nlohmann::json::array();
    for (const fs::path& port : entries(dev / "ports"))
      ports.push_back({{"port", port.filename().string()},
                       {"state", read_line(port / "state")},
                       {"rate", read_line(port / "rate")},
                       {"link_layer", read_line(port / "link_layer")}});
    out.push_back({{"name", dev.filename().string()},
                   {"node_type", read_line(dev / "node_type")},
                   {"firmware", read_line(dev / "fw_ver")},
                   {"ports", ports}});
  }
  return out;
}

namespace {

// The few NVML entry points used, declared as nvml.h does (NVML is opened at
// run time, so no header or link dependency).
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlReturn_t = int;
struct NvmlMemory {
  unsigned long long total, free, used;
};
constexpr int kNvmlSuccess = 0, kP2pCapsNvlink = 2, kP2pStatusOk = 0, kNvlinkMaxLinks = 18, kRemoteIsSwitch = 2;

// nvidia-smi topo -m's names for the PCIe path between two GPUs
// (nvmlGpuTopologyLevel_t: 0 internal, 10 single switch, 20 multiple
// switches, 30 host bridge, 40 NUMA node, 50 across sockets).
std::string pcie_path(int level) {
  switch (level) {
    case 0: return "internal";
    case 10: return "PIX";
    case 20: return "PXB";
    case 30: return "PHB";
    case 40: return "NODE";
    case 50: return "SYS";
  }
  return "unknown";
}

struct Nvml {
  Library lib{{"libnvidia-ml.so.1", "libnvidia-ml.so"}};
  nvmlReturn_t (*init)() = lib.symbol<nvmlReturn_t (*)()>("nvmlInit_v2");
  nvmlReturn_t (*shutdown)() = lib.symbol<nvmlReturn_t (*)()>("nvmlShutdown");
  nvmlReturn_t (*count)(unsigned*) = lib.symbol<nvmlReturn_t (*)(unsigned*)>("nvmlDeviceGetCount_v2");
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) =
      lib.symbol<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2");
  nvmlReturn_t (*name)(nvmlDevice_t, char*,
                       unsigned) = lib.symbol<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>("nvmlDeviceGetName");
  nvmlReturn_t (*memory)(nvmlDevice_t, NvmlMemory*) =
      lib.symbol<nvmlReturn_t (*)(nvmlDevice_t, NvmlMemory*)>("nvmlDeviceGetMemoryInfo");
  nvmlReturn_t (*driver)(char*, unsigned) = lib.symbol<nvmlReturn_t (*)(char*, unsigned)>("nvmlSystemGetDriverVersion");
  nvmlReturn_t (*cuda_driver)(int*) = lib.symbol<nvmlReturn_t (*)(int*)>("nvmlSystemGetCudaDriverVersion_v2");
  nvmlReturn_t (*ancestor)(nvmlDevice_t, nvmlDevice_t, int*) =
      lib.symbol<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, int*)>("nvmlDeviceGetTopologyCommonAncestor");
  nvmlReturn_t (*p2p)(nvmlDevice_t, nvmlDevice_t, int, int*) =
      lib.symbol<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, int, int*)>("nvmlDeviceGetP2PStatus");
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, int*) =
      lib.symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned, int*)>("nvmlDeviceGetNvLinkState");
  nvmlReturn_t (*remote_type)(nvmlDevice_t, unsigned, int*) =
      lib.symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned, int*)>("nvmlDeviceGetNvLinkRemoteDeviceType");
};

// Active NVLinks of a GPU and how many of them end at an NVSwitch.
std::pair<int, int> nvlinks(const Nvml& n, nvmlDevice_t d) {
  int active = 0, to_switch = 0;
  if (!n.link_state) return {0, 0};
  for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
    int on = 0, type = -1;
    if (n.link_state(d, link, &on) != kNvmlSuccess || !on) continue;
    ++active;
    if (n.remote_type && n.remote_type(d, link, &type) == kNvmlSuccess && type == kRemoteIsSwitch) ++to_switch;
  }
  return {active, to_switch};
}

// "NVSwitch", "NV<links>" or the PCIe path between GPUs a and b.
std::string link_between(const Nvml& n, nvmlDevice_t a, nvmlDevice_t b, std::pair<int, int> links_a) {
  int status = -1, level = -1;
  if (n.p2p && n.p2p(a, b, kP2pCapsNvlink, &status) == kNvmlSuccess && status == kP2pStatusOk)
    return links_a.second > 0 ? "NVSwitch" : cat("NV", links_a.first);
  if (n.ancestor && n.ancestor(a, b, &level) == kNvmlSuccess) return pcie_path(level);
  return "unknown";
}

}  // namespace

nlohmann::json nvml_gpus() {
  Nvml n;
  if (!n.lib.handle) return unavailable("libnvidia-ml.so.1 not found (no NVIDIA driver on this node)");
  if (!n.init || !n.count || !n.handle || !n.name)
    return unavailable("libnvidia-ml lacks nvmlInit_v2 / nvmlDeviceGetCount_v2");
  if (n.init() != kNvmlSuccess) return unavailable("nvmlInit_v2 failed (driver not loaded?)");
  nlohmann::json out = {{"available", true}};
  char text[96] = {0};
  if (n.driver && n.driver(text, sizeof text) == kNvmlSuccess) out["driver"] = text;
  int cuda = 0;
  if (n.cuda_driver && n.cuda_driver(&cuda) == kNvmlSuccess)
    out["cuda_driver"] = cat(cuda / 1000, ".", cuda % 1000 / 10);
  unsigned count = 0;
  n.count(&count);
  std::vector<nvmlDevice_t> devices(count, nullptr);
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::pair<int, int>> links(count);
  for (unsigned i = 0; i < count; ++i) {
    n.handle(i, &devices[i]);
    nlohmann::json g = {{"index", i}};
    if (n.name(devices[i], text, sizeof text) == kNvmlSuccess) g["name"] = text;
    NvmlMemory memory{};
    if (n.memory && n.memory(devices[i], &memory) == kNvmlSuccess) g["memory_bytes"] = memory.total;
    links[i] = nvlinks(n, devices[i]);
    g["nvlinks_active"] = links[i].first;
    g["nvlinks_to_nvswitch"] = links[i].second;
    gpus.push_back(g);
  }
  // The interconnect matrix, row i column j: how GPU i reaches GPU j.
  nlohmann::json matrix = nlohmann::json::array();
  for (unsigned i = 0; i < count; ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (unsigned j = 0; j < count; ++j)
      row.push_back(i == j ? "X" : link_between(n, devices[i], devices[j], links[i]));
    matrix.push_back(row);
  }
  out["count"] = count;
  out["gpus"] = gpus;
  out["interconnect"] = matrix;
  if (n.shutdown) n.shutdown();
  return out;
}

nlohmann::json library_versions() {
  nlohmann::json out = nlohmann::json::object();
  {
    Library cudnn({"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"});
    auto version = cudnn.symbol<size_t (*)()>("cudnnGetVersion");
    if (version) {
      const size_t v = version();  // cuDNN 9: major*10000 + minor*100 + patch; 8: major*1000 + minor*100 + patch
      out["cudnn"] = v >= 90000 ? cat(v / 10000, ".", v % 10000 / 100, ".", v % 100)
                                : cat(v / 1000, ".", v % 1000 / 100, ".", v % 100);
    } else {
      out["cudnn"] = "unavailable (libcudnn not found)";
    }
  }
  {
    Library nccl({"libnccl.so.2", "libnccl.so"});
    auto version = nccl.symbol<int (*)(int*)>("ncclGetVersion");
    int v = 0;
    if (version && version(&v) == 0) out["nccl"] = cat(v / 10000, ".", v / 100 % 100, ".", v % 100);
    else out["nccl"] = "unavailable (libnccl not found)";
  }
  {
    Library verbs({"libibverbs.so.1", "libibverbs.so"});
    auto list = verbs.symbol<void** (*)(int*)>("ibv_get_device_list");
    auto name = verbs.symbol<const char* (*)(void*)>("ibv_get_device_name");
    auto free_list = verbs.symbol<void (*)(void**)>("ibv_free_device_list");
    if (list && name && free_list) {
      int count = 0;
      void** devices = list(&count);
      nlohmann::json names = nlohmann::json::array();
      for (int i = 0; devices && i < count; ++i) names.push_back(name(devices[i]));
      if (devices) free_list(devices);
      out["ibverbs_devices"] = names;
    } else {
      out["ibverbs_devices"] = "unavailable (libibverbs not found)";
    }
  }
  return out;
}

namespace {

// What an interconnect matrix holds off its diagonal: "NVSwitch", "NV18, PXB", ...
std::string interconnect_kinds(const nlohmann::json& gpus) {
  if (!gpus.value("available", false)) return "unavailable: " + gpus.value("reason", std::string("unknown"));
  std::set<std::string> kinds;
  for (const nlohmann::json& row : gpus["interconnect"])
    for (const nlohmann::json& cell : row)
      if (cell != "X") kinds.insert(cell.get<std::string>());
  if (kinds.empty()) return gpus.value("count", 0) == 1 ? "single GPU" : "none";
  return join(std::vector<std::string>(kinds.begin(), kinds.end()), ", ");
}

// The machine's part that is not the same on every node: "" when they match.
std::string differences(const nlohmann::json& nodes) {
  std::set<std::string> cpus, memories, gpus;
  for (const nlohmann::json& n : nodes) {
    cpus.insert(n["cpu"]["model"].get<std::string>());
    memories.insert(std::to_string(static_cast<long long>(n["memory_bytes"].get<double>() / (1 << 30))));
    gpus.insert(n["gpus"].value("available", false) ? n["gpus"]["gpus"].dump() : "none");
  }
  std::vector<std::string> out;
  if (cpus.size() > 1) out.push_back("CPU models");
  if (memories.size() > 1) out.push_back("memory sizes");
  if (gpus.size() > 1) out.push_back("GPUs");
  return join(out, ", ");
}

}  // namespace

nlohmann::json system_summary(const nlohmann::json& topology, Device device) {
  const nlohmann::json& nodes = topology.at("nodes");
  if (nodes.empty()) return nlohmann::json::object();
  const nlohmann::json& first = nodes[0];
  const nlohmann::json& gpus = first["gpus"];
  const bool have_gpus = gpus.value("available", false) && gpus.value("count", 0) > 0;
  nlohmann::json network = nlohmann::json::array();
  for (const nlohmann::json& nic : first["network"])
    if (nic.value("physical", false))
      network.push_back(cat(nic["name"].get<std::string>(), nic.contains("speed_mbps")
                                                                ? cat(" ", nic["speed_mbps"].get<long long>(), " Mb/s")
                                                                : std::string()));
  for (const nlohmann::json& ib : first["infiniband"])
    for (const nlohmann::json& port : ib["ports"])
      network.push_back(cat(ib["name"].get<std::string>(), "/", port["port"].get<std::string>(), " ",
                            port["rate"].get<std::string>(), " ", port["link_layer"].get<std::string>()));
  int accelerators = 0;
  for (const nlohmann::json& n : nodes) accelerators += n["gpus"].value("count", 0);
  nlohmann::json out = {
      {"nodes", nodes.size()},
      {"host_processor", first["cpu"]["model"]},
      {"host_processors_per_node", first["cpu"]["sockets"]},
      {"host_memory_bytes", first["memory_bytes"]},
      {"accelerator", have_gpus ? gpus["gpus"][0].value("name", std::string("unknown")) : std::string("none")},
      {"accelerators_per_node", have_gpus ? gpus.value("count", 0) : 0},
      {"accelerators_total", accelerators},
      {"accelerators_used", device == Device::cuda},
      {"gpu_interconnect", interconnect_kinds(gpus)},
      {"network", network}};
  if (const std::string d = differences(nodes); !d.empty()) out["heterogeneous"] = "nodes differ in " + d;
  return out;
}

nlohmann::json describe_this_node() {
  return {{"host", host_name()},
          {"cpu", cpu_description()},
          {"memory_bytes", memory_total_bytes()},
          {"network", network_interfaces()},
          {"infiniband", infiniband_devices()},
          {"gpus", nvml_gpus()},
          {"libraries", library_versions()}};
}

nlohmann::json describe_nodes(Communicator& world, const NodeMap& nodes) {
  std::string mine;
  const int node = nodes.at(static_cast<size_t>(world.rank()));
  const bool first = std::find(nodes.begin(), nodes.end(), node) - nodes.begin() == world.rank();
  if (first) mine = describe_this_node().dump();
  nlohmann::json described = nlohmann::json::array();
  for (const std::string& s : all_gather_strings(world, mine))
    if (!s.empty()) described.push_back(nlohmann::json::parse(s));
  return {{"nodes", described},
          {"node_of_rank", nodes},
          {"ranks_per_node_each", ranks_per_node(nodes)},
          {"detected_by", "MPI_COMM_TYPE_SHARED"}};
}

}  // namespace sextant
