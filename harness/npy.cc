#include "harness/npy.h"

#include <fstream>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant {

namespace {
std::string descr(DType dtype) {
  switch (dtype) {
    case DType::f64: return "<f8";
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<f4";
  }
  return "";
}
}  // namespace

void write_npy(const std::string& path, const Tensor& tensor) {
  Tensor host = tensor.is_host() ? tensor : tensor.to(Device::host);
  if (host.dtype() == DType::bf16) host = host.to(DType::f32);
  std::string shape;
  for (int64_t d : host.shape()) shape += std::to_string(d) + ", ";
  if (host.ndim() > 1) shape.resize(shape.size() - 2);
  std::string header = "{'descr': '" + descr(host.dtype()) + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Magic (6) + version (2) + length (2) + header, padded with spaces to 64 bytes, ending in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw RuntimeError("cannot write " + path);
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t length = static_cast<uint16_t>(header.size());
  out.put(static_cast<char>(length & 0xff));
  out.put(static_cast<char>(length >> 8));
  out << header;
  out.write(static_cast<const char*>(host.raw()), static_cast<std::streamsize>(host.nbytes()));
  if (!out) throw RuntimeError("error writing " + path);
}

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[10];
  if (!in.read(magic, 10) || std::string(magic, 6) != "\x93NUMPY") throw RuntimeError(path + " is not a .npy file");
  size_t length = static_cast<unsigned char>(magic[8]) | (static_cast<unsigned char>(magic[9]) << 8);
  std::string header(length, ' ');
  in.read(header.data(), static_cast<std::streamsize>(length));
  DType dtype = header.find("<f8") != std::string::npos   ? DType::f64
                : header.find("<f4") != std::string::npos ? DType::f32
                : header.find("<f2") != std::string::npos ? DType::f16
                                                          : throw RuntimeError(path + ": unsupported dtype");
  size_t open = header.find('('), close = header.find(')');
  Shape shape;
  for (const std::string& part : split(header.substr(open + 1, close - open - 1), ','))
    if (part.find_first_not_of(' ') != std::string::npos) shape.push_back(std::stoll(part));
  Tensor t = Tensor::empty(shape, dtype);
  in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  if (!in) throw RuntimeError(path + " is truncated");
  return t;
}

}  // namespace sextant
