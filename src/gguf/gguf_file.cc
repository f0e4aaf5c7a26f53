#include "gguf/gguf_file.h"

#include <cstring>
#include <limits>

#include "util/checked_math.h"

namespace drift {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian uint32
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kDefaultAlignment = 32;

// Size in bytes of a scalar of this type, or 0 for string/array.
uint64_t scalar_size(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

bool is_known_type(uint32_t raw) { return raw <= static_cast<uint32_t>(GgufType::kFloat64); }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Reads little-endian values from the mapping, checking every read against the end.
// Errors say what was being read and at which offset.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  Expected<T> read(std::string_view what) {
    if (remaining() < sizeof(T))
      return make_error("file truncated at offset {} while reading {} ({} bytes needed, {} left)",
                        pos_, what, sizeof(T), remaining());
    T v = load<T>(data_ + pos_);
    pos_ += sizeof(T);
    return v;
  }

  Expected<std::string_view> read_string(std::string_view what) {
    uint64_t at = pos_;
    DRIFT_ASSIGN_OR_RETURN(uint64_t length, read<uint64_t>(what));
    if (length > remaining())
      return make_error("{} at offset {} has length {} but only {} bytes remain in the file", what,
                        at, length, remaining());
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return s;
  }

  Expected<const uint8_t*> take(uint64_t n, std::string_view what) {
    if (n > remaining())
      return make_error("{} at offset {} needs {} bytes but only {} remain in the file", what, pos_,
                        n, remaining());
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

Expected<GgufValue> read_value(Cursor& cur, GgufType type, std::string_view key) {
  GgufValue v;
  v.type = type;
  std::string what = fmt::format("value of '{}'", key);
  switch (type) {
    case GgufType::kUint8: {
      DRIFT_ASSIGN_OR_RETURN(v.u, cur.read<uint8_t>(what));
      break;
    }
    case GgufType::kUint16: {
      DRIFT_ASSIGN_OR_RETURN(v.u, cur.read<uint16_t>(what));
      break;
    }
    case GgufType::kUint32: {
      DRIFT_ASSIGN_OR_RETURN(v.u, cur.read<uint32_t>(what));
      break;
    }
    case GgufType::kUint64: {
      DRIFT_ASSIGN_OR_RETURN(v.u, cur.read<uint64_t>(what));
      break;
    }
    case GgufType::kInt8: {
      DRIFT_ASSIGN_OR_RETURN(v.i, cur.read<int8_t>(what));
      break;
    }
    case GgufType::kInt16: {
      DRIFT_ASSIGN_OR_RETURN(v.i, cur.read<int16_t>(what));
      break;
    }
    case GgufType::kInt32: {
      DRIFT_ASSIGN_OR_RETURN(v.i, cur.read<int32_t>(what));
      break;
    }
    case GgufType::kInt64: {
      DRIFT_ASSIGN_OR_RETURN(v.i, cur.read<int64_t>(what));
      break;
    }
    case GgufType::kFloat32: {
      DRIFT_ASSIGN_OR_RETURN(v.f, cur.read<float>(what));
      break;
    }
    case GgufType::kFloat64: {
      DRIFT_ASSIGN_OR_RETURN(v.f, cur.read<double>(what));
      break;
    }
    case GgufType::kBool: {
      DRIFT_ASSIGN_OR_RETURN(uint8_t b, cur.read<uint8_t>(what));
      if (b > 1) return make_error("bool value of '{}' is {}, not 0 or 1", key, b);
      v.u = b;
      break;
    }
    case GgufType::kString: {
      DRIFT_ASSIGN_OR_RETURN(v.s, cur.read_string(what));
      break;
    }
    case GgufType::kArray: {
      DRIFT_ASSIGN_OR_RETURN(uint32_t raw_elem, cur.read<uint32_t>(what + " element type"));
      if (!is_known_type(raw_elem))
        return make_error("array '{}' has unknown element type {}", key, raw_elem);
      GgufType elem = static_cast<GgufType>(raw_elem);
      if (elem == GgufType::kArray)
        return make_error("array '{}' contains arrays; nested arrays are not supported", key);
      DRIFT_ASSIGN_OR_RETURN(uint64_t count, cur.read<uint64_t>(what + " element count"));
      v.array.element_type = elem;
      v.array.count = count;
      if (elem == GgufType::kString) {
        // Each string needs at least its 8-byte length: bound the count before reserving.
        if (count > cur.remaining() / 8)
          return make_error("array '{}' claims {} strings but only {} bytes remain in the file",
                            key, count, cur.remaining());
        v.array.strings.reserve(count);
        for (uint64_t i = 0; i < count; ++i) {
          DRIFT_ASSIGN_OR_RETURN(std::string_view s,
                                 cur.read_string(fmt::format("string {} of array '{}'", i, key)));
          v.array.strings.push_back(s);
        }
      } else {
        auto bytes = checked_mul(count, scalar_size(elem));
        if (!bytes)
          return make_error("array '{}' has {} elements: byte size overflows", key, count);
        DRIFT_ASSIGN_OR_RETURN(v.array.raw, cur.take(*bytes, fmt::format("array '{}'", key)));
        if (elem == GgufType::kBool) {
          for (uint64_t i = 0; i < count; ++i)
            if (v.array.raw[i] > 1)
              return make_error("element {} of bool array '{}' is {}, not 0 or 1", i, key,
                                v.array.raw[i]);
        }
      }
      break;
    }
  }
  return v;
}

// The header: magic, a supported version (into `version`), and the tensor and metadata counts,
// bounded by what the rest of the file could hold.
struct GgufCounts {
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
};
Expected<GgufCounts> read_header(Cursor& cur, uint32_t& version) {
  DRIFT_ASSIGN_OR_RETURN(uint32_t magic, cur.read<uint32_t>("magic"));
  if (magic != kGgufMagic)
    return make_error("bad magic 0x{:08x} (expected \"GGUF\"); not a GGUF file", magic);
  DRIFT_ASSIGN_OR_RETURN(version, cur.read<uint32_t>("version"));
  if (version == 1)
    return make_error(
        "GGUF version 1 is not supported (only versions 2 and 3); re-convert the model");
  if (version == 0x02000000u || version == 0x03000000u)
    return make_error("big-endian GGUF files are not supported");
  if (version != 2 && version != 3)
    return make_error("unsupported GGUF version {} (only versions 2 and 3)", version);

  GgufCounts counts;
  DRIFT_ASSIGN_OR_RETURN(counts.n_tensors, cur.read<uint64_t>("tensor count"));
  DRIFT_ASSIGN_OR_RETURN(counts.n_kv, cur.read<uint64_t>("metadata key-value count"));
  const uint64_t n_tensors = counts.n_tensors, n_kv = counts.n_kv;
  // Bound the counts by what the file could hold before reserving anything: a key-value needs at
  // least a key length (8), a value type (4) and one value byte; a tensor info needs a name
  // length (8), n_dims (4), one dimension (8), a type (4) and an offset (8).
  if (n_kv > cur.remaining() / 13)
    return make_error("metadata key-value count {} is larger than the file can hold", n_kv);
  if (n_tensors > cur.remaining() / 32)
    return make_error("tensor count {} is larger than the file can hold", n_tensors);
  return counts;
}

// Tensor info `t`: its name, shape, type and offset, checked against the file's limits.
Expected<GgufTensor> read_tensor_info(Cursor& cur, uint64_t t, uint64_t alignment) {
  GgufTensor tensor;
  DRIFT_ASSIGN_OR_RETURN(tensor.name, cur.read_string(fmt::format("name of tensor {}", t)));
  if (tensor.name.empty()) return make_error("tensor {} has an empty name", t);
  DRIFT_ASSIGN_OR_RETURN(tensor.n_dims,
                         cur.read<uint32_t>(fmt::format("n_dims of tensor '{}'", tensor.name)));
  if (tensor.n_dims == 0 || tensor.n_dims > kMaxDims)
    return make_error("tensor '{}' has {} dimensions (must be 1 to {})", tensor.name, tensor.n_dims,
                      kMaxDims);
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < tensor.n_dims; ++d) {
    DRIFT_ASSIGN_OR_RETURN(tensor.ne[d], cur.read<uint64_t>(fmt::format(
                                             "dimension {} of tensor '{}'", d, tensor.name)));
    if (tensor.ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return make_error("tensor '{}' dimension {} is {}, beyond int64", tensor.name, d,
                        tensor.ne[d]);
    auto product = checked_mul(n_elements, tensor.ne[d]);
    if (!product || *product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return make_error("tensor '{}' element count overflows 64 bits", tensor.name);
    n_elements = *product;
  }
  tensor.n_elements = n_elements;

  DRIFT_ASSIGN_OR_RETURN(uint32_t raw_type,
                         cur.read<uint32_t>(fmt::format("type of tensor '{}'", tensor.name)));
  const GgmlTypeInfo* info = ggml_type_info(raw_type);
  if (info == nullptr)
    return make_error("tensor '{}' has unknown tensor type {}", tensor.name, raw_type);
  tensor.type = info->type;
  if (tensor.ne[0] % info->block_size != 0)
    return make_error("tensor '{}' row length {} is not a multiple of the {} block size {}",
                      tensor.name, tensor.ne[0], info->name, info->block_size);
  auto n_bytes = checked_mul(n_elements / info->block_size, info->type_size);
  if (!n_bytes) return make_error("tensor '{}' byte size overflows 64 bits", tensor.name);
  tensor.n_bytes = *n_bytes;

  DRIFT_ASSIGN_OR_RETURN(tensor.offset,
                         cur.read<uint64_t>(fmt::format("offset of tensor '{}'", tensor.name)));
  if (tensor.offset % alignment != 0)
    return make_error("tensor '{}' offset {} is not a multiple of the alignment {}", tensor.name,
                      tensor.offset, alignment);
  return tensor;
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "unknown";
}

bool GgufArray::is_integer() const {
  switch (element_type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

bool GgufArray::is_float() const {
  return element_type == GgufType::kFloat32 || element_type == GgufType::kFloat64;
}

int64_t GgufArray::int_at(uint64_t i) const {
  const uint8_t* p = raw + i * scalar_size(element_type);
  switch (element_type) {
    case GgufType::kUint8:
    case GgufType::kBool:
      return load<uint8_t>(p);
    case GgufType::kInt8:
      return load<int8_t>(p);
    case GgufType::kUint16:
      return load<uint16_t>(p);
    case GgufType::kInt16:
      return load<int16_t>(p);
    case GgufType::kUint32:
      return load<uint32_t>(p);
    case GgufType::kInt32:
      return load<int32_t>(p);
    case GgufType::kUint64:
      return static_cast<int64_t>(load<uint64_t>(p));
    case GgufType::kInt64:
      return load<int64_t>(p);
    default:
      return 0;  // not an integer array: callers check is_integer() first
  }
}

double GgufArray::float_at(uint64_t i) const {
  const uint8_t* p = raw + i * scalar_size(element_type);
  if (element_type == GgufType::kFloat32) return load<float>(p);
  if (element_type == GgufType::kFloat64) return load<double>(p);
  return static_cast<double>(int_at(i));
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

std::string GgufValue::to_display_string(size_t max_chars) const {
  auto cut = [max_chars](std::string_view s) {
    std::string out;
    for (char c : s.substr(0, max_chars)) {
      if (c == '\n')
        out += "\\n";
      else
        out += c;
    }
    if (s.size() > max_chars) out += fmt::format("... ({} bytes)", s.size());
    return out;
  };
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kUint16:
    case GgufType::kUint32:
    case GgufType::kUint64:
      return fmt::format("{}", u);
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64:
      return fmt::format("{}", i);
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      return fmt::format("{:g}", f);
    case GgufType::kBool:
      return u ? "true" : "false";
    case GgufType::kString:
      return cut(s);
    case GgufType::kArray:
      return fmt::format("[{} x {}]", array.count, gguf_type_name(array.element_type));
  }
  return "?";
}

Expected<GgufFile> GgufFile::open(const std::string& path) {
  DRIFT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  return parse(std::move(file));
}

Expected<GgufFile> GgufFile::parse(MappedFile file) {
  GgufFile gguf(std::move(file));
  Status status = gguf.parse_all();
  if (!status.ok()) {
    const std::string& where = gguf.file_.path();
    return make_error("invalid GGUF file '{}': {}", where, status.message());
  }
  return gguf;
}

Status GgufFile::parse_all() {
  Cursor cur(file_.data(), file_.size());

  DRIFT_ASSIGN_OR_RETURN(const GgufCounts counts, read_header(cur, version_));
  const uint64_t n_tensors = counts.n_tensors, n_kv = counts.n_kv;

  metadata_.reserve(n_kv);
  metadata_index_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    DRIFT_ASSIGN_OR_RETURN(std::string_view key,
                           cur.read_string(fmt::format("key of metadata entry {}", k)));
    if (key.empty()) return make_error("metadata entry {} has an empty key", k);
    DRIFT_ASSIGN_OR_RETURN(uint32_t raw_type,
                           cur.read<uint32_t>(fmt::format("type of metadata '{}'", key)));
    if (!is_known_type(raw_type))
      return make_error("metadata '{}' has unknown value type {}", key, raw_type);
    DRIFT_ASSIGN_OR_RETURN(GgufValue value, read_value(cur, static_cast<GgufType>(raw_type), key));
    if (!metadata_index_.emplace(key, metadata_.size()).second)
      return make_error("duplicate metadata key '{}'", key);
    metadata_.push_back(GgufKeyValue{key, std::move(value)});
  }

  if (const GgufValue* align = find("general.alignment")) {
    if (align->type != GgufType::kUint32)
      return make_error("general.alignment has type {}, expected uint32",
                        gguf_type_name(align->type));
    if (!is_power_of_two(align->u))
      return make_error("general.alignment is {}, which is not a power of two", align->u);
    alignment_ = align->u;
  } else {
    alignment_ = kDefaultAlignment;
  }

  tensors_.reserve(n_tensors);
  tensor_index_.reserve(n_tensors);
  for (uint64_t t = 0; t < n_tensors; ++t) {
    DRIFT_ASSIGN_OR_RETURN(GgufTensor tensor, read_tensor_info(cur, t, alignment_));
    if (!tensor_index_.emplace(tensor.name, tensors_.size()).second)
      return make_error("duplicate tensor name '{}'", tensor.name);
    tensors_.push_back(tensor);
  }

  auto data_start = checked_align_up(cur.offset(), alignment_);
  if (!data_start || *data_start > file_.size()) {
    if (n_tensors > 0)
      return make_error(
          "file truncated: the tensor data section would start at offset {} but "
          "the file has {} bytes",
          cur.offset(), file_.size());
    data_start = file_.size();
  }
  data_offset_ = *data_start;
  const uint64_t data_size = file_.size() - data_offset_;
  for (GgufTensor& tensor : tensors_) {
    auto end = checked_add(tensor.offset, tensor.n_bytes);
    if (!end || *end > data_size)
      return make_error(
          "tensor '{}' data [{}, +{}) extends past the end of the data section "
          "({} bytes): file truncated or offset corrupt",
          tensor.name, tensor.offset, tensor.n_bytes, data_size);
    tensor.data = file_.data() + data_offset_ + tensor.offset;
  }
  return Status::Ok();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Expected<std::string_view> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return make_error("missing metadata key '{}'", key);
  if (v->type != GgufType::kString)
    return make_error("metadata '{}' has type {}, expected string", key, gguf_type_name(v->type));
  return v->s;
}

Expected<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return make_error("missing metadata key '{}'", key);
  if (!v->is_integer())
    return make_error("metadata '{}' has type {}, expected an integer", key,
                      gguf_type_name(v->type));
  switch (v->type) {
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64:
      if (v->i < 0)
        return make_error("metadata '{}' is {}, expected a non-negative value", key, v->i);
      return static_cast<uint64_t>(v->i);
    default:
      return v->u;
  }
}

Expected<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return make_error("missing metadata key '{}'", key);
  if (v->type == GgufType::kFloat32 || v->type == GgufType::kFloat64) return v->f;
  if (v->is_integer()) {
    bool is_signed = v->type == GgufType::kInt8 || v->type == GgufType::kInt16 ||
                     v->type == GgufType::kInt32 || v->type == GgufType::kInt64;
    return is_signed ? static_cast<double>(v->i) : static_cast<double>(v->u);
  }
  return make_error("metadata '{}' has type {}, expected a number", key, gguf_type_name(v->type));
}

Expected<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return make_error("missing metadata key '{}'", key);
  if (v->type != GgufType::kBool)
    return make_error("metadata '{}' has type {}, expected bool", key, gguf_type_name(v->type));
  return v->u != 0;
}

Expected<const GgufArray*> GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return make_error("missing metadata key '{}'", key);
  if (v->type != GgufType::kArray)
    return make_error("metadata '{}' has type {}, expected array", key, gguf_type_name(v->type));
  return &v->array;
}

}  // namespace drift
