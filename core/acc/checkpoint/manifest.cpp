#include "acc/checkpoint/manifest.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <cstdio>
#include <sstream>

#include "acc/util/error.h"

namespace acc::checkpoint {

namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

constexpr const char* kFormatName = "acc.checkpoint";

// Reading: every accessor names the field that is missing or wrong.
class Reader {
 public:
  Reader(Object::Ptr obj, std::string where) : obj_(std::move(obj)), where_(std::move(where)) {}

  bool has(const std::string& key) const { return obj_->has(key) && !obj_->isNull(key); }
  Poco::Dynamic::Var get(const std::string& key) const {
    ACC_CHECK(has(key), where_, ": the field \"", key, "\" is missing");
    return obj_->get(key);
  }
  std::string str(const std::string& key) const {
    const auto v = get(key);
    ACC_CHECK(v.isString(), where_, ".", key, " must be a string");
    return v.toString();
  }
  int64_t num(const std::string& key, int64_t min = 0) const {
    const auto v = get(key);
    ACC_CHECK(v.isInteger(), where_, ".", key, " must be an integer");
    const auto x = v.convert<Poco::Int64>();
    ACC_CHECK(x >= min, where_, ".", key, " is ", x, ", expected at least ", min);
    return x;
  }
  Reader object(const std::string& key) const {
    auto o = obj_->getObject(key);
    ACC_CHECK(o, where_, ".", key, " must be an object");
    return Reader(o, where_ + "." + key);
  }
  Array::Ptr array(const std::string& key) const {
    auto a = obj_->getArray(key);
    ACC_CHECK(a, where_, ".", key, " must be an array");
    return a;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    obj_->getNames(out);
    return out;
  }
  Reader at(const Array::Ptr& a, size_t i, const std::string& key) const {
    auto o = a->getObject(static_cast<unsigned>(i));
    const std::string where = where_ + "." + key + "[" + std::to_string(i) + "]";
    ACC_CHECK(o, where, " must be an object");
    return Reader(o, where);
  }
  const std::string& where() const { return where_; }

 private:
  Object::Ptr obj_;
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
  slice.dim = static_cast<int>(r.num("dim"));
  ACC_CHECK(static_cast<size_t>(slice.dim) < shape.size(), r.where(), ".dim is ", slice.dim,
            ", the tensor has ", shape.size(), " dimensions");
  const int64_t extent = shape[static_cast<size_t>(slice.dim)];
  const auto blocks = r.array("blocks");
  int64_t last = 0;
  for (unsigned i = 0; i < blocks->size(); ++i) {
    const auto block = blocks->getArray(i);
    ACC_CHECK(block && block->size() == 2 && block->get(0).isInteger() && block->get(1).isInteger(),
              r.where(), ".blocks[", i, "] must be [begin, end]");
    const int64_t b = block->get(0).convert<Poco::Int64>(), e = block->get(1).convert<Poco::Int64>();
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
  for (unsigned i = 0; i < shape->size(); ++i) {
    const auto v = shape->get(i);
    ACC_CHECK(v.isInteger() && v.convert<Poco::Int64>() >= 0, r.where(), ".shape[", i,
              "] must be a non-negative integer");
    t.shape.push_back(v.convert<Poco::Int64>());
  }
  ACC_CHECK(!r.has("dtype") || r.str("dtype") == "F32", r.where(), ".dtype is ", r.str("dtype"),
            "; this acc reads F32 checkpoints");
  if (r.has("hf_transposed")) t.hf_transposed = r.get("hf_transposed").convert<bool>();
  if (r.has("step")) t.step = r.num("step");
  const auto pieces = r.array("pieces");
  for (size_t i = 0; i < pieces->size(); ++i) {
    const Reader p = r.at(pieces, i, "pieces");
    PieceRecord rec{p.str("file"), p.str("entry"), p.num("begin"), p.num("count", 1),
                    static_cast<uint32_t>(p.num("crc32")), false};
    if (p.has("transposed")) rec.transposed = p.get("transposed").convert<bool>();
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
  Object::Ptr obj;
  try {
    obj = Poco::JSON::Parser().parse(json).extract<Object::Ptr>();
  } catch (const Poco::Exception& e) {
    ACC_FAIL(where, ": not valid JSON (", e.displayText(), ")");
  } catch (const std::exception& e) {
    ACC_FAIL(where, ": not a JSON object (", e.what(), ")");
  }
  const Reader r(obj, where);
  ACC_CHECK(r.has("format") && r.str("format") == kFormatName, where,
            ": not an acc checkpoint manifest (\"format\" is not \"", kFormatName, "\")");
  Manifest m;
  m.version = static_cast<int>(r.num("version", 1));
  ACC_CHECK(m.version <= kFormatVersion, where, ": checkpoint format version ", m.version,
            " was written by a newer acc; this acc reads versions up to ", kFormatVersion);
  m.model = r.str("model");
  m.strategy = r.str("strategy");
  m.state_dict_type = r.str("state_dict_type");
  m.world_size = static_cast<int>(r.num("world_size", 1));
  const Reader pos = r.object("position");
  m.position = {pos.num("step"), pos.num("epoch"), pos.num("batch")};
  if (r.has("optimizer")) {
    const Reader o = r.object("optimizer");
    m.optimizer = o.str("name");
    m.optimizer_steps = o.num("steps");
    const auto names = o.array("state_names");
    for (unsigned i = 0; i < names->size(); ++i) m.optimizer_state_names.push_back(names->get(i).toString());
  }
  if (r.has("scheduler_step")) m.scheduler_step = r.num("scheduler_step");
  m.config_yaml = r.has("config") ? r.str("config") : "";
  const Reader files = r.object("files");
  for (const auto& name : files.names()) m.files[name] = static_cast<uint64_t>(files.num(name));
  const Reader tensors = r.object("tensors");
  for (const auto& name : tensors.names()) m.tensors[name] = parse_tensor(tensors.object(name));
  return m;
}

}  // namespace acc::checkpoint
