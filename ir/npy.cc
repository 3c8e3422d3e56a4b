#include "ir/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "ir/error.h"

namespace pipetrain::ir {

namespace {
const char* descr_of(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kF16: return "<f2";
    case DType::kI64: return "<i8";
    case DType::kI32: return "<i4";
    case DType::kBool: return "|b1";
    default: return nullptr;
  }
}

// NumPy dtypes pipetrain has no IR type for, read into the nearest one: the
// small integer types (token ids, uint8 images) into i64, float64 into f32.
struct Widened {
  const char* descr;
  size_t bytes;
  DType to;
};
constexpr Widened kWidened[] = {
    {"|u1", 1, DType::kI64}, {"|i1", 1, DType::kI64}, {"<u2", 2, DType::kI64},
    {"<i2", 2, DType::kI64}, {"<u4", 4, DType::kI64}, {"<f8", 8, DType::kF32},
};

template <typename From, typename To>
void convert(const std::vector<char>& bytes, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, bytes.data() + static_cast<size_t>(i) * sizeof(From), sizeof(From));
    out[i] = static_cast<To>(v);
  }
}

Tensor read_widened(std::istream& f, const Widened& w, const Shape& shape,
                    const std::string& path) {
  Tensor t(w.to, shape);
  std::vector<char> bytes(static_cast<size_t>(t.numel()) * w.bytes);
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw ModelError(path + ": .npy data is shorter than its shape " + shape_str(shape));
  const std::string d = w.descr;
  const int64_t n = t.numel();
  if (d == "<f8") {
    convert<double>(bytes, t.data<float>(), n);
  } else {
    int64_t* out = t.data<int64_t>();
    if (d == "|u1") convert<uint8_t>(bytes, out, n);
    if (d == "|i1") convert<int8_t>(bytes, out, n);
    if (d == "<u2") convert<uint16_t>(bytes, out, n);
    if (d == "<i2") convert<int16_t>(bytes, out, n);
    if (d == "<u4") convert<uint32_t>(bytes, out, n);
  }
  return t;
}

std::string field(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) throw ModelError(path + ": .npy header has no '" + key + "'");
  size_t colon = header.find(':', k);
  return header.substr(colon + 1);
}
}  // namespace

Tensor load_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ModelError(path + ": cannot open");
  return read_npy(f, path);
}

Tensor read_npy(std::istream& f, const std::string& path) {
  char magic[8];
  f.read(magic, 8);
  if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw ModelError(path + ": not a .npy file");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t h;
    f.read(reinterpret_cast<char*>(&h), 2);
    header_len = h;
  } else {
    f.read(reinterpret_cast<char*>(&header_len), 4);
  }
  if (!f || header_len > (1u << 20)) throw ModelError(path + ": truncated .npy header");
  std::string header(header_len, '\0');
  f.read(header.data(), header_len);
  if (!f) throw ModelError(path + ": truncated .npy header");

  std::string d = field(header, "descr", path);
  size_t q1 = d.find('\''), q2 = d.find('\'', q1 + 1);
  std::string descr = d.substr(q1 + 1, q2 - q1 - 1);
  DType dtype = DType::kUndefined;
  for (DType t : {DType::kF32, DType::kF16, DType::kI64, DType::kI32, DType::kBool})
    if (descr == descr_of(t) || (t == DType::kBool && descr == "<b1")) dtype = t;
  const Widened* widen = nullptr;
  for (const Widened& w : kWidened)
    if (descr == w.descr) widen = &w;
  if (dtype == DType::kUndefined && !widen)
    throw ModelError(path + ": .npy dtype '" + descr +
                     "' is not supported (f32, f64, f16, i64, i32, i16, i8, u32, u16, u8, bool)");
  if (field(header, "fortran_order", path).find("True") < 8)
    throw ModelError(path + ": Fortran-order .npy is not supported");
  std::string s = field(header, "shape", path);
  size_t open = s.find('('), close = s.find(')');
  Shape shape;
  std::stringstream ss(s.substr(open + 1, close - open - 1));
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok.find_first_not_of(" ") == std::string::npos) continue;
    shape.push_back(std::stoll(tok));
  }
  if (widen) return read_widened(f, *widen, shape, path);
  Tensor t(dtype, shape);
  f.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  if (!f) throw ModelError(path + ": .npy data is shorter than its shape " + shape_str(shape));
  return t;
}

void save_npy(const Tensor& t, const std::string& path) {
  const char* descr = descr_of(t.dtype());
  if (!descr)
    throw ModelError(std::string("cannot write dtype ") + dtype_name(t.dtype()) + " to .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) shape += std::to_string(t.shape()[i]) + ",";
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) throw Error(path + ": cannot write");
    f.write("\x93NUMPY\x01\x00", 8);
    uint16_t len = static_cast<uint16_t>(header.size());
    f.write(reinterpret_cast<const char*>(&len), 2);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    f.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    if (!f) throw Error(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error(path + ": rename failed");
}

}  // namespace pipetrain::ir
