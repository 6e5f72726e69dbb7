#include "acc/checkpoint/manifest.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <cstdio>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>

#include "acc/io/json_document.h"
#include "acc/util/error.h"

namespace acc::checkpoint {

namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kFormatName = "acc.checkpoint";

// Reading: every accessor names the field that is missing or wrong.
class Reader {
 public:
  using Value = io::JsonDocument::Value;
  Reader(Value obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  bool has(const std::string& key) const {
    const auto v = obj_.find(key);
    return v && !v->is_null();
  }
  Value get(const std::string& key) const {
    const auto v = obj_.find(key);
    ACC_CHECK(v && !v->is_null(), where_, ": the field \"", key, "\" is missing");
    return *v;
  }
  std::string str(const std::string& key) const {
    const auto v = get(key);
    ACC_CHECK(v.is_string(), where_, ".", key, " must be a string");
    return std::string(v.as_string());
  }
  int64_t num(const std::string& key, int64_t min = 0, int64_t max = std::numeric_limits<int64_t>::max()) const {
    const auto v = get(key);
    const auto x = v.as_int64();
    ACC_CHECK(x, where_, ".", key, " must be an integer", v.is_integer() ? " that fits in 64 bits" : "");
    ACC_CHECK(*x >= min, where_, ".", key, " is ", *x, ", expected at least ", min);
    ACC_CHECK(*x <= max, where_, ".", key, " is ", *x, ", expected at most ", max);
    return *x;
  }
  bool flag(const std::string& key) const {
    const auto v = get(key);
    ACC_CHECK(v.is_bool(), where_, ".", key, " must be true or false");
    return v.as_bool();
  }
  Reader object(const std::string& key) const {
    const auto v = obj_.find(key);
    ACC_CHECK(v && v->is_object(), where_, ".", key, " must be an object");
    return Reader(*v, where_ + "." + key);
  }
  std::vector<Value> array(const std::string& key) const {
    const auto v = obj_.find(key);
    ACC_CHECK(v && v->is_array(), where_, ".", key, " must be an array");
    return v->elements();
  }
  // f(name, member) for each member, in order (an object of many members read in one pass);
  // a name given twice is an error.
  template <class F>
  void for_each_member(F f) const {
    std::set<std::string_view> names;
    for (const auto& [name, value] : obj_.members()) {
      ACC_CHECK(names.insert(name).second, where_, ".", name, " is given twice");
      f(std::string(name), value);
    }
  }
  Reader at(const std::vector<Value>& a, size_t i, const std::string& key) const {
    const std::string where = where_ + "." + key + "[" + std::to_string(i) + "]";
    ACC_CHECK(a[i].is_object(), where, " must be an object");
    return Reader(a[i], where);
  }
  const std::string& where() const { return where_; }

 private:
  Value obj_;
  std::string where_;
};

Object::Ptr position_json(const Position& p) {
  Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  o->set("step", p.step);
  o->set("epoch", p.epoch);
  o->set("batch", p.batch);
  return o;
}

Object::Ptr tensor_json(const TensorRecord& t) {
  Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  Array::Ptr shape = new Array;
  for (int64_t d : t.shape) shape->add(d);
  o->set("shape", shape);
  o->set("dtype", "F32");  // acc keeps f32 masters and f32 optimizer state
  if (t.hf_transposed) o->set("hf_transposed", true);
  if (t.step) o->set("step", *t.step);
  Array::Ptr pieces = new Array;
  for (const auto& p : t.pieces) {
    Object::Ptr j = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    j->set("file", p.file);
    j->set("entry", p.entry);
    j->set("begin", p.begin);
    j->set("count", p.count);
    j->set("crc32", static_cast<Poco::Int64>(p.crc32));
    if (p.transposed) j->set("transposed", true);
    if (p.slice) {
      Object::Ptr slice = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
      slice->set("dim", p.slice->dim);
      Array::Ptr blocks = new Array;
      for (const auto& [b, e] : p.slice->blocks) {
        Array::Ptr block = new Array;
        block->add(b);
        block->add(e);
        blocks->add(block);
      }
      slice->set("blocks", blocks);
      j->set("slice", slice);
    }
    pieces->add(j);
  }
  o->set("pieces", pieces);
  return o;
}

// A piece's slice: a dim of the tensor and ascending, disjoint [begin, end) ranges inside it.
ShardedModel::DimSlice parse_slice(const Reader& r, const Shape& shape) {
  ShardedModel::DimSlice slice;
  slice.dim = static_cast<int>(r.num("dim", 0, std::numeric_limits<int>::max()));
  ACC_CHECK(static_cast<size_t>(slice.dim) < shape.size(), r.where(), ".dim is ", slice.dim,
            ", the tensor has ", shape.size(), " dimensions");
  const int64_t extent = shape[static_cast<size_t>(slice.dim)];
  const auto blocks = r.array("blocks");
  int64_t last = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto block = blocks[i].elements();
    const auto b_of = block.size() == 2 ? block[0].as_int64() : std::nullopt;
    const auto e_of = block.size() == 2 ? block[1].as_int64() : std::nullopt;
    ACC_CHECK(blocks[i].is_array() && b_of && e_of, r.where(), ".blocks[", i, "] must be [begin, end]");
    const int64_t b = *b_of, e = *e_of;
    ACC_CHECK(last <= b && b <= e && e <= extent, r.where(), ".blocks[", i, "] is [", b, ", ", e,
              "]: blocks must be ascending, disjoint and inside [0, ", extent, "]");
    slice.blocks.emplace_back(b, e);
    last = e;
  }
  return slice;
}

// Elements of the tensor, or of the slice of it.
int64_t held_elements(const Shape& shape, const std::optional<ShardedModel::DimSlice>& slice) {
  if (!slice) return shape_numel(shape);
  Shape held = shape;
  int64_t& extent = held[static_cast<size_t>(slice->dim)];
  extent = 0;
  for (const auto& [b, e] : slice->blocks) extent += e - b;
  return shape_numel(held);
}

TensorRecord parse_tensor(const Reader& r) {
  TensorRecord t;
  const auto shape = r.array("shape");
  for (size_t i = 0; i < shape.size(); ++i) {
    const auto d = shape[i].as_int64();
    ACC_CHECK(d && *d >= 0, r.where(), ".shape[", i, "] must be a non-negative integer");
    t.shape.push_back(*d);
  }
  ACC_CHECK(!r.has("dtype") || r.str("dtype") == "F32", r.where(), ".dtype is ", r.str("dtype"),
            "; this acc reads F32 checkpoints");
  if (r.has("hf_transposed")) t.hf_transposed = r.flag("hf_transposed");
  if (r.has("step")) t.step = r.num("step");
  const auto pieces = r.array("pieces");
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Reader p = r.at(pieces, i, "pieces");
    PieceRecord rec{p.str("file"), p.str("entry"), p.num("begin"), p.num("count", 1),
                    static_cast<uint32_t>(p.num("crc32", 0, std::numeric_limits<uint32_t>::max())), false};
    if (p.has("transposed")) rec.transposed = p.flag("transposed");
    if (p.has("slice")) rec.slice = parse_slice(p.object("slice"), t.shape);
    const int64_t holds = held_elements(t.shape, rec.slice);
    ACC_CHECK(rec.begin + rec.count <= holds, p.where(), ": elements [", rec.begin, ", ",
              rec.begin + rec.count, ") do not fit in the ", holds, " elements of ",
              rec.slice ? "its slice" : "the tensor");
    t.pieces.push_back(std::move(rec));
  }
  return t;
}

}  // namespace

std::string shard_file_name(int rank, int world) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "shard-%05d-of-%05d.safetensors", rank, world);
  return buf;
}

std::string optimizer_key(const std::string& state_name, const std::string& parameter) {
  return "optimizer." + state_name + "." + parameter;
}

bool is_optimizer_key(const std::string& key) { return key.rfind("optimizer.", 0) == 0; }

std::string Manifest::to_json() const {
  Object root(Poco::JSON_PRESERVE_KEY_ORDER);
  root.set("format", kFormatName);
  bool sliced = false;
  for (const auto& [name, rec] : tensors)
    for (const auto& p : rec.pieces) sliced = sliced || p.slice.has_value();
  root.set("version", sliced ? 2 : 1);
  root.set("model", model);
  root.set("strategy", strategy);
  root.set("state_dict_type", state_dict_type);
  root.set("world_size", world_size);
  root.set("position", position_json(position));
  if (!optimizer.empty()) {
    Object::Ptr o = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
    o->set("name", optimizer);
    o->set("steps", optimizer_steps);
    Array::Ptr names = new Array;
    for (const auto& n : optimizer_state_names) names->add(n);
    o->set("state_names", names);
    root.set("optimizer", o);
  }
  if (scheduler_step) root.set("scheduler_step", *scheduler_step);
  root.set("config", config_yaml);
  Object::Ptr f = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const auto& [name, bytes] : files) f->set(name, static_cast<Poco::UInt64>(bytes));
  root.set("files", f);
  Object::Ptr t = new Object(Poco::JSON_PRESERVE_KEY_ORDER);
  for (const auto& [name, rec] : tensors) t->set(name, tensor_json(rec));
  root.set("tensors", t);
  std::ostringstream os;
  root.stringify(os, 1);
  os << "\n";
  return os.str();
}

Manifest Manifest::parse(const std::string& json, const std::string& where) {
  const io::JsonDocument doc(json, where);
  ACC_CHECK(doc.root().is_object(), where, ": not a JSON object");
  const Reader r(doc.root(), where);
  ACC_CHECK(r.has("format") && r.str("format") == kFormatName, where,
            ": not an acc checkpoint manifest (\"format\" is not \"", kFormatName, "\")");
  Manifest m;
  m.version = static_cast<int>(r.num("version", 1, std::numeric_limits<int>::max()));
  ACC_CHECK(m.version <= kFormatVersion, where, ": checkpoint format version ", m.version,
            " was written by a newer acc; this acc reads versions up to ", kFormatVersion);
  m.model = r.str("model");
  m.strategy = r.str("strategy");
  m.state_dict_type = r.str("state_dict_type");
  m.world_size = static_cast<int>(r.num("world_size", 1, std::numeric_limits<int>::max()));
  const Reader pos = r.object("position");
  m.position = {pos.num("step"), pos.num("epoch"), pos.num("batch")};
  if (r.has("optimizer")) {
    const Reader o = r.object("optimizer");
    m.optimizer = o.str("name");
    m.optimizer_steps = o.num("steps");
    for (const auto& name : o.array("state_names")) {
      ACC_CHECK(name.is_string(), where, ".optimizer.state_names must hold strings");
      m.optimizer_state_names.emplace_back(name.as_string());
    }
  }
  if (r.has("scheduler_step")) m.scheduler_step = r.num("scheduler_step");
  m.config_yaml = r.has("config") ? r.str("config") : "";
  const Reader files = r.object("files");
  files.for_each_member([&](const std::string& name, Reader::Value v) {
    const auto bytes = v.as_int64();
    ACC_CHECK(bytes && *bytes >= 0, files.where(), ".", name, " must be a non-negative integer");
    m.files[name] = static_cast<uint64_t>(*bytes);
  });
  const Reader tensors = r.object("tensors");
  tensors.for_each_member([&](const std::string& name, Reader::Value v) {
    ACC_CHECK(v.is_object(), tensors.where(), ".", name, " must be an object");
    m.tensors[name] = parse_tensor(Reader(v, tensors.where() + "." + name));
  });
  return m;
}

}  // namespace acc::checkpoint
