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

// The text after `'key':` in the header's dict.
std::string field(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  size_t colon = k == std::string::npos ? k : header.find(':', k);
  if (colon == std::string::npos) throw ModelError(path + ": .npy header has no '" + key + "'");
  return header.substr(colon + 1);
}

std::string quoted(const std::string& v, const std::string& path) {
  size_t q1 = v.find_first_not_of(' ');
  size_t q2 = q1 == std::string::npos || (v[q1] != '\'' && v[q1] != '"') ? std::string::npos
                                                                        : v.find(v[q1], q1 + 1);
  if (q2 == std::string::npos) throw ModelError(path + ": .npy header's descr is not a string");
  return v.substr(q1 + 1, q2 - q1 - 1);
}

// "(3, 4)", "(5,)", "()": each dimension a plain decimal number.
Shape parse_shape(const std::string& v, const std::string& path) {
  size_t open = v.find('('), close = open == std::string::npos ? open : v.find(')', open);
  if (close == std::string::npos) throw ModelError(path + ": .npy header's shape is not a tuple");
  Shape shape;
  std::stringstream ss(v.substr(open + 1, close - open - 1));
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    const size_t b = tok.find_first_not_of(' '), e = tok.find_last_not_of(' ');
    if (b == std::string::npos) continue;
    tok = tok.substr(b, e - b + 1);
    if (tok.size() > 15 || tok.find_first_not_of("0123456789") != std::string::npos)
      throw ModelError(path + ": .npy header's shape has a bad dimension '" + tok + "'");
    shape.push_back(std::stoll(tok));
  }
  return shape;
}

// The bytes left in `f` (-1 when the stream cannot tell).
int64_t bytes_left(std::istream& f) {
  const std::streampos here = f.tellg();
  if (here < 0) return -1;
  f.seekg(0, std::ios::end);
  const std::streampos end = f.tellg();
  f.seekg(here);
  return end < 0 ? -1 : static_cast<int64_t>(end - here);
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

  const std::string descr = quoted(field(header, "descr", path), path);
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
  const Shape shape = parse_shape(field(header, "shape", path), path);
  // The size against the file, before allocating: a damaged header can claim
  // terabytes. need > left / d is need * d > left, without overflowing.
  if (const int64_t left = bytes_left(f); left >= 0) {
    int64_t need = widen ? static_cast<int64_t>(widen->bytes)
                         : static_cast<int64_t>(dtype_size(dtype));
    for (int64_t d : shape) need = d != 0 && need > left / d ? left + 1 : need * d;
    if (need > left)
      throw ModelError(path + ": .npy data is shorter than its shape " + shape_str(shape));
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
