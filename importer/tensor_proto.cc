// TensorProto <-> ir::Tensor: raw_data, typed fields and external data, with
// every size checked so that a malformed file is a ModelError, never a crash.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "importer/internal.h"
#include "ir/error.h"

namespace pipetrain::importer {

namespace fs = std::filesystem;

namespace detail {

std::string onnx_dtype_name(int32_t onnx_type) {
  std::string name;
  if (onnx::TensorProto_DataType_IsValid(onnx_type))
    name = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(onnx_type));
  if (name.empty()) return "unknown type " + std::to_string(onnx_type);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

int narrow_int_bytes(int32_t onnx_type) {
  switch (onnx_type) {
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8: return 1;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16: return 2;
    case onnx::TensorProto::UINT32: return 4;
    case onnx::TensorProto::UINT64: return 8;
    default: return 0;
  }
}

bool is_unsigned_int(int32_t onnx_type) {
  return onnx_type == onnx::TensorProto::UINT8 || onnx_type == onnx::TensorProto::UINT16 ||
         onnx_type == onnx::TensorProto::UINT32 || onnx_type == onnx::TensorProto::UINT64;
}

ir::DType imported_dtype(int32_t onnx_type) {
  if (onnx_type == onnx::TensorProto::DOUBLE) return ir::DType::kF32;
  if (const int bytes = narrow_int_bytes(onnx_type))
    return bytes < 4 ? ir::DType::kI32 : ir::DType::kI64;
  return ir::dtype_from_onnx(onnx_type);
}

ir::DType checked_dtype(int32_t onnx_type, const std::string& what) {
  ir::DType t = imported_dtype(onnx_type);
  if (t == ir::DType::kUndefined)
    throw UnsupportedOp(what + " has dtype " + onnx_dtype_name(onnx_type) +
                        ", which pipetrain does not support (f32, f16, bf16, f64, i64, i32, "
                        "i16, i8, u64, u32, u16, u8, bool; f64 is computed in f32, i8-i16 and "
                        "u8-u16 in i32, u32-u64 in i64)");
  return t;
}

ir::Shape checked_shape(const std::vector<int64_t>& dims, ir::DType dtype,
                        const std::string& what) {
  int64_t bytes = static_cast<int64_t>(ir::dtype_size(dtype));
  for (int64_t d : dims) {
    if (d < 0) throw ModelError(what + " has negative dimension " + std::to_string(d));
    // Multiply in steps that cannot overflow: each factor is checked first.
    if (d != 0 && bytes > kMaxTensorBytes / d)
      throw ModelError(what + " is too large (" + ir::shape_str(dims) + ", limit 16 GiB)");
    bytes *= d;
  }
  if (bytes > kMaxTensorBytes)
    throw ModelError(what + " is too large (" + ir::shape_str(dims) + ", limit 16 GiB)");
  return dims;
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw ModelError(path + ": cannot read file (no such file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path + ": cannot open file");
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) throw ModelError(path + ": cannot read file");
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), size)) throw ModelError(path + ": cannot read file");
  return bytes;
}

namespace {

int64_t parse_nonnegative(const std::string& s, const std::string& what) {
  int64_t v = -1;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0)
    throw ModelError(what + ": bad external data number '" + s + "'");
  return v;
}

}  // namespace

std::string external_file(const onnx::TensorProto& proto, const std::string& base_dir,
                          const std::string& what) {
  std::string location;
  for (const auto& kv : proto.external_data())
    if (kv.key() == "location") location = kv.value();
  if (location.empty()) throw ModelError(what + ": external data has no location");
  fs::path rel(location);
  if (rel.is_absolute())
    throw ModelError(what + ": external data location '" + location + "' is an absolute path");
  for (const auto& part : rel)
    if (part == "..")
      throw ModelError(what + ": external data location '" + location +
                       "' escapes the model directory");
  fs::path base = base_dir.empty() ? fs::path(".") : fs::path(base_dir);
  std::error_code ec;
  fs::path base_canon = fs::weakly_canonical(base, ec);
  fs::path file_canon = fs::weakly_canonical(base / rel, ec);
  if (ec) throw ModelError(what + ": cannot resolve external data file '" + location + "'");
  auto rel_to_base = file_canon.lexically_relative(base_canon);
  if (rel_to_base.empty() || *rel_to_base.begin() == "..")
    throw ModelError(what + ": external data location '" + location +
                     "' escapes the model directory");
  return file_canon.string();
}

namespace {

struct ExternalRef {
  fs::path file;
  int64_t offset = 0;
};

// Resolves and checks a tensor's external data before anything is allocated.
// The location is relative to the model's directory and may not escape it (no
// absolute paths, no "..", no symlink leading outside); the file must hold
// `nbytes` at the offset.
ExternalRef resolve_external(const onnx::TensorProto& proto, const std::string& base_dir,
                             const std::string& what, size_t nbytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") offset = parse_nonnegative(kv.value(), what);
    if (kv.key() == "length") length = parse_nonnegative(kv.value(), what);
  }
  fs::path file_canon(external_file(proto, base_dir, what));
  std::error_code ec;
  if (length >= 0 && static_cast<size_t>(length) != nbytes)
    throw ModelError(what + ": external data length " + std::to_string(length) +
                     " does not match its shape (" + std::to_string(nbytes) + " bytes)");
  if (!fs::is_regular_file(file_canon, ec))
    throw ModelError(what + ": external data file '" + location + "' not found next to the model");
  auto file_size = fs::file_size(file_canon, ec);
  if (ec || static_cast<uint64_t>(offset) > file_size || nbytes > file_size - offset)
    throw ModelError(what + ": external data file '" + location + "' is too short (needs " +
                     std::to_string(nbytes) + " bytes at offset " + std::to_string(offset) + ")");
  return {file_canon, offset};
}

void read_external(const ExternalRef& ref, const std::string& what, size_t nbytes, void* dst) {
  std::ifstream in(ref.file, std::ios::binary);
  in.seekg(ref.offset);
  if (nbytes > 0 && !in.read(static_cast<char*>(dst), static_cast<std::streamsize>(nbytes)))
    throw ModelError(what + ": cannot read external data file '" + ref.file.string() + "'");
}

template <typename Field>
void check_count(const Field& field, int64_t n, const char* field_name, const std::string& what) {
  if (static_cast<int64_t>(field.size()) != n)
    throw ModelError(what + " has " + std::to_string(field.size()) + " values in " + field_name +
                     ", but its shape needs " + std::to_string(n));
}

}  // namespace

namespace {

/// A float64 tensor read as float32 (rounded to nearest): raw_data, double_data or external.
ir::Tensor f64_tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir,
                                 const std::string& what, const ir::Shape& shape) {
  const int64_t n = ir::numel(shape);
  const size_t nbytes = static_cast<size_t>(n) * sizeof(double);
  std::vector<double> wide(static_cast<size_t>(n));
  if (proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    read_external(resolve_external(proto, base_dir, what, nbytes), what, nbytes, wide.data());
  } else if (proto.has_raw_data()) {
    if (proto.raw_data().size() != nbytes)
      throw ModelError(what + " has " + std::to_string(proto.raw_data().size()) +
                       " bytes of raw_data, but its shape " + ir::shape_str(shape) + " needs " +
                       std::to_string(nbytes));
    if (nbytes) std::memcpy(wide.data(), proto.raw_data().data(), nbytes);
  } else {
    check_count(proto.double_data(), n, "double_data", what);
    if (n) std::memcpy(wide.data(), proto.double_data().data(), nbytes);
  }
  ir::Tensor t(ir::DType::kF32, shape);
  for (int64_t i = 0; i < n; ++i)
    t.data<float>()[i] = static_cast<float>(wide[static_cast<size_t>(i)]);
  return t;
}

/// A narrow integer tensor (int8, int16, uint8-uint64) read into i32 or i64 as
/// imported_dtype maps it: raw_data or external data in the file's width, or
/// int32_data (8 and 16 bits) or uint64_data (uint32, uint64).
ir::Tensor narrow_tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir,
                                    const std::string& what, const ir::Shape& shape) {
  const int32_t type = proto.data_type();
  const size_t width = static_cast<size_t>(narrow_int_bytes(type));
  const bool is_signed = !is_unsigned_int(type);
  const int64_t n = ir::numel(shape);
  std::vector<int64_t> v(static_cast<size_t>(n));
  auto from_bytes = [&](const char* bytes) {
    for (int64_t i = 0; i < n; ++i) {
      uint64_t u = 0;
      std::memcpy(&u, bytes + static_cast<size_t>(i) * width, width);  // little-endian
      if (is_signed && width < 8 && (u >> (8 * width - 1)) & 1) u |= ~uint64_t{0} << (8 * width);
      v[static_cast<size_t>(i)] = static_cast<int64_t>(u);
    }
  };
  const size_t nbytes = static_cast<size_t>(n) * width;
  if (proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    std::string bytes(nbytes, '\0');
    read_external(resolve_external(proto, base_dir, what, nbytes), what, nbytes, bytes.data());
    from_bytes(bytes.data());
  } else if (proto.has_raw_data()) {
    if (proto.raw_data().size() != nbytes)
      throw ModelError(what + " has " + std::to_string(proto.raw_data().size()) +
                       " bytes of raw_data, but its shape " + ir::shape_str(shape) + " needs " +
                       std::to_string(nbytes));
    from_bytes(proto.raw_data().data());
  } else if (width >= 4) {
    check_count(proto.uint64_data(), n, "uint64_data", what);
    for (int64_t i = 0; i < n; ++i)
      v[static_cast<size_t>(i)] = static_cast<int64_t>(proto.uint64_data(static_cast<int>(i)));
  } else {
    check_count(proto.int32_data(), n, "int32_data", what);
    for (int64_t i = 0; i < n; ++i)
      v[static_cast<size_t>(i)] = proto.int32_data(static_cast<int>(i));
  }
  ir::Tensor t(imported_dtype(type), shape);
  for (int64_t i = 0; i < n; ++i) {
    if (t.dtype() == ir::DType::kI32)
      t.data<int32_t>()[i] = static_cast<int32_t>(v[static_cast<size_t>(i)]);
    else
      t.data<int64_t>()[i] = v[static_cast<size_t>(i)];
  }
  return t;
}

}  // namespace

ir::Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir,
                             const std::string& what) {
  if (proto.has_segment()) throw UnsupportedOp(what + " is a segmented tensor");
  ir::DType dtype = checked_dtype(proto.data_type(), what);
  if (proto.data_type() == onnx::TensorProto::DOUBLE) {
    std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
    // Sized as float64 for the limit: that is what the file holds.
    checked_shape(dims, ir::DType::kI64, what);
    return f64_tensor_from_proto(proto, base_dir, what, ir::Shape(dims.begin(), dims.end()));
  }
  if (narrow_int_bytes(proto.data_type())) {
    std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
    checked_shape(dims, dtype, what);  // sized as the wider IR tensor it becomes
    return narrow_tensor_from_proto(proto, base_dir, what, ir::Shape(dims.begin(), dims.end()));
  }
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  ir::Shape shape = checked_shape(dims, dtype, what);
  const int64_t n = ir::numel(shape);
  const size_t nbytes = static_cast<size_t>(n) * ir::dtype_size(dtype);

  // Every size is checked against the data actually present before the
  // tensor is allocated: a forged dims field must not allocate 16 GiB.
  if (proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    ExternalRef ref = resolve_external(proto, base_dir, what, nbytes);
    ir::Tensor t = ir::Tensor::uninitialized(dtype, shape);  // every byte read next
    read_external(ref, what, nbytes, t.raw());
    if (dtype == ir::DType::kBool)  // normalise: our kernels read bools as 0/1
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
    return t;
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != nbytes)
      throw ModelError(what + " has " + std::to_string(proto.raw_data().size()) +
                       " bytes of raw_data, but its shape " + ir::shape_str(shape) + " needs " +
                       std::to_string(nbytes));
    ir::Tensor t = ir::Tensor::uninitialized(dtype, shape);  // every byte copied next
    if (nbytes) std::memcpy(t.raw(), proto.raw_data().data(), nbytes);
    if (dtype == ir::DType::kBool)
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
    return t;
  }
  switch (dtype) {
    case ir::DType::kF32: check_count(proto.float_data(), n, "float_data", what); break;
    case ir::DType::kI64: check_count(proto.int64_data(), n, "int64_data", what); break;
    default: check_count(proto.int32_data(), n, "int32_data", what); break;
  }
  ir::Tensor t(dtype, shape);
  switch (dtype) {
    case ir::DType::kF32:
      if (n) std::memcpy(t.raw(), proto.float_data().data(), nbytes);
      break;
    case ir::DType::kI64:
      if (n) std::memcpy(t.raw(), proto.int64_data().data(), nbytes);
      break;
    case ir::DType::kI32:
      if (n) std::memcpy(t.raw(), proto.int32_data().data(), nbytes);
      break;
    case ir::DType::kF16:
    case ir::DType::kBF16:
      // 16-bit floats are stored as their bit patterns in int32_data.
      for (int64_t i = 0; i < n; ++i)
        t.data<uint16_t>()[i] = static_cast<uint16_t>(proto.int32_data(static_cast<int>(i)));
      break;
    case ir::DType::kBool:
      for (int64_t i = 0; i < n; ++i)
        t.data<uint8_t>()[i] = proto.int32_data(static_cast<int>(i)) != 0;
      break;
    case ir::DType::kUndefined: break;
  }
  return t;
}

void inline_external_data(onnx::TensorProto* proto, const std::string& base_dir,
                          const std::string& what) {
  const ir::DType dtype = checked_dtype(proto->data_type(), what);
  const size_t elem = proto->data_type() == onnx::TensorProto::DOUBLE ? sizeof(double)
                      : narrow_int_bytes(proto->data_type())
                          ? static_cast<size_t>(narrow_int_bytes(proto->data_type()))
                          : ir::dtype_size(dtype);
  std::vector<int64_t> dims(proto->dims().begin(), proto->dims().end());
  const size_t nbytes = static_cast<size_t>(ir::numel(checked_shape(dims, dtype, what))) * elem;
  std::string bytes(nbytes, '\0');
  read_external(resolve_external(*proto, base_dir, what, nbytes), what, nbytes, bytes.data());
  proto->clear_external_data();
  proto->set_data_location(onnx::TensorProto::DEFAULT);
  proto->set_raw_data(std::move(bytes));
}

void tensor_to_proto(const ir::Tensor& t, const std::string& name, onnx::TensorProto* proto,
                     int32_t onnx_type) {
  proto->Clear();
  proto->set_name(name);
  if ((onnx_type == onnx::TensorProto::FLOAT16 || onnx_type == onnx::TensorProto::BFLOAT16) &&
      t.dtype() == ir::DType::kF32) {  // float32 master weights back to the file's half
    const bool bf16 = onnx_type == onnx::TensorProto::BFLOAT16;
    ir::Tensor half(bf16 ? ir::DType::kBF16 : ir::DType::kF16, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i)
      half.data<uint16_t>()[i] =
          bf16 ? ir::f32_to_bf16(t.data<float>()[i]) : ir::f32_to_f16(t.data<float>()[i]);
    tensor_to_proto(half, name, proto);
    return;
  }
  if (onnx_type == onnx::TensorProto::DOUBLE && t.dtype() == ir::DType::kF32) {
    proto->set_data_type(onnx::TensorProto::DOUBLE);
    for (int64_t d : t.shape()) proto->add_dims(d);
    std::vector<double> wide(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) wide[static_cast<size_t>(i)] = t.data<float>()[i];
    proto->set_raw_data(
        std::string(reinterpret_cast<const char*>(wide.data()), wide.size() * sizeof(double)));
    return;
  }
  if (const int width = narrow_int_bytes(onnx_type);
      width && (t.dtype() == ir::DType::kI32 || t.dtype() == ir::DType::kI64)) {
    proto->set_data_type(onnx_type);  // back to the file's width (two's complement, truncated)
    for (int64_t d : t.shape()) proto->add_dims(d);
    std::string bytes(static_cast<size_t>(t.numel()) * static_cast<size_t>(width), '\0');
    for (int64_t i = 0; i < t.numel(); ++i) {
      const uint64_t u = static_cast<uint64_t>(t.dtype() == ir::DType::kI64 ? t.data<int64_t>()[i]
                                                                            : t.data<int32_t>()[i]);
      std::memcpy(bytes.data() + static_cast<size_t>(i) * static_cast<size_t>(width), &u,
                  static_cast<size_t>(width));
    }
    proto->set_raw_data(std::move(bytes));
    return;
  }
  proto->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) proto->add_dims(d);
  proto->set_raw_data(t.nbytes() ? std::string(static_cast<const char*>(t.raw()), t.nbytes())
                                 : std::string());
}

}  // namespace detail

ir::Tensor load_tensor_proto(const std::string& path) {
  return load_tensor_proto(path, nullptr);
}

ir::Tensor load_tensor_proto(const std::string& path, std::string* name) {
  std::string bytes = detail::read_file(path);
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes))
    throw ModelError(path + ": not a valid TensorProto (protobuf parse failed)");
  if (name) *name = proto.name();
  std::string base = fs::path(path).parent_path().string();
  std::string what = path + ": tensor" + (proto.name().empty() ? "" : " '" + proto.name() + "'");
  try {
    return detail::tensor_from_proto(proto, base, what);
  } catch (const UnsupportedOp&) {
    throw;
  } catch (const ModelError&) {
    throw;
  } catch (const std::exception& e) {
    throw ModelError(what + ": " + e.what());
  }
}

}  // namespace pipetrain::importer
