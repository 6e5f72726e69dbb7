#!/usr/bin/env python3
"""read_checkpoint.py CHECKPOINT_DIR [REFERENCE.safetensors]

An independent reader of acc's checkpoint format, written from the format's description in the
docs only (manifest.json + safetensors files), never from acc's reader or writer. Standard
library only. It checks the manifest, every listed file's size and safetensors header, every
piece's entry, dtype, size and CRC-32, that each tensor's pieces cover it exactly once, and, for
FULL_STATE_DICT, model.safetensors' Hugging Face layout; it then reassembles every tensor and
prints a summary. Exit 0 when all holds; otherwise one line "read_checkpoint: ..." on stderr and
exit 1. (REFERENCE is accepted and ignored.)
"""
import binascii
import json
import math
import os
import struct
import sys

DTYPE_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
               "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}


class Bad(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Bad(what)


def numel(shape):
    return math.prod(shape)


def whole_indices(shape, piece, where):
    """The whole tensor's flat indices of a piece's elements: begin.. of the flattened tensor,
    or, with a "slice" (dim, blocks), of that slice flattened (the blocks' indices along dim,
    concatenated in order)."""
    begin, count = piece["begin"], piece["count"]
    if "slice" not in piece:
        check(begin + count <= numel(shape), where + ": past the end of the tensor")
        return range(begin, begin + count)
    dim, blocks = piece["slice"]["dim"], piece["slice"]["blocks"]
    check(0 <= dim < len(shape), where + ": slice dim %d of a %d-d tensor" % (dim, len(shape)))
    along = [i for b, e in blocks for i in range(b, e)]
    check(all(0 <= i < shape[dim] for i in along) and len(set(along)) == len(along),
          where + ": slice blocks %s outside dim %d or overlapping" % (blocks, dim))
    local = list(shape)
    local[dim] = len(along)
    check(begin + count <= numel(local), where + ": past the end of its slice %s" % local)
    out = []
    for i in range(begin, begin + count):
        index = []
        for extent in reversed(local):  # unravel in the slice's shape
            index.append(i % extent)
            i //= extent
        index.reverse()
        index[dim] = along[index[dim]]
        flat = 0
        for d, extent in enumerate(shape):
            flat = flat * extent + index[d]
        out.append(flat)
    return out


def read_safetensors(path, size):
    """Returns (metadata, {name: (dtype, shape, raw bytes)}) after checking the header."""
    with open(path, "rb") as f:
        blob = f.read()
    check(len(blob) == size, "%s: %d bytes, manifest says %d" % (path, len(blob), size))
    check(len(blob) >= 8, "%s: shorter than the 8-byte header length" % path)
    (n,) = struct.unpack_from("<Q", blob, 0)
    check(8 + n <= len(blob), "%s: header length %d past the end of the file" % (path, n))
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except ValueError as e:
        raise Bad("%s: header is not JSON: %s" % (path, e))
    check(isinstance(header, dict), "%s: header is not an object" % path)
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    check(isinstance(meta, dict) and all(isinstance(k, str) and isinstance(v, str)
                                         for k, v in meta.items()),
          "%s: __metadata__ is not an object of strings" % path)
    entries, spans = {}, []
    for name, t in header.items():
        where = "%s: entry %s" % (path, name)
        check(isinstance(t, dict) and set(t) == {"dtype", "shape", "data_offsets"},
              where + " lacks dtype/shape/data_offsets")
        dtype, shape, (begin, end) = t["dtype"], t["shape"], t["data_offsets"]
        check(dtype in DTYPE_SIZES, where + " has unknown dtype " + str(dtype))
        check(all(isinstance(d, int) and d >= 0 for d in shape), where + " has a bad shape")
        check(0 <= begin <= end <= len(data), where + " has offsets outside the data")
        check(end - begin == numel(shape) * DTYPE_SIZES[dtype],
              where + " spans %d bytes for %s %s" % (end - begin, dtype, shape))
        entries[name] = (dtype, shape, data[begin:end])
        spans.append((begin, end, name))
    spans.sort()
    for (_, e0, a), (b1, _, b) in zip(spans, spans[1:]):
        check(e0 <= b1, "%s: entries %s and %s overlap" % (path, a, b))
    return meta, entries


def main(argv):
    if len(argv) not in (2, 3):
        raise Bad("usage: read_checkpoint.py CHECKPOINT_DIR [REFERENCE.safetensors]")
    root = argv[1]
    try:
        with open(os.path.join(root, "manifest.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise Bad("manifest.json: %s" % e)
    check(manifest.get("format") == "acc.checkpoint", "format is %r" % manifest.get("format"))
    check(manifest.get("version") in (1, 2), "version is %r" % manifest.get("version"))
    kind = manifest.get("state_dict_type")
    check(kind in ("SHARDED_STATE_DICT", "FULL_STATE_DICT"), "state_dict_type is %r" % kind)

    files = {}
    for name, size in manifest["files"].items():
        check(os.sep not in name and name not in ("", ".", ".."), "bad file name " + name)
        path = os.path.join(root, name)
        check(os.path.isfile(path), "file %s is missing" % name)
        files[name] = read_safetensors(path, size)

    tensors, total = {}, 0
    for key, t in manifest["tensors"].items():
        shape, n = t["shape"], numel(t["shape"])
        flat = [None] * n
        for p in t["pieces"]:
            where = "%s piece [%d, +%d)" % (key, p["begin"], p["count"])
            check(p["file"] in files, where + ": file %s not in the manifest" % p["file"])
            entry = files[p["file"]][1].get(p["entry"])
            check(entry is not None, where + ": no entry %s in %s" % (p["entry"], p["file"]))
            dtype, eshape, raw = entry
            check(dtype == "F32", where + ": entry is " + dtype)
            check(numel(eshape) == p["count"], where + ": entry has %d elements" % numel(eshape))
            crc = binascii.crc32(raw)
            check(crc == p["crc32"], where + ": CRC-32 %d, manifest says %d" % (crc, p["crc32"]))
            check("slice" not in p or manifest["version"] == 2, where + ": a slice in version 1")
            values = struct.unpack("<%df" % p["count"], raw)
            if p.get("transposed", False):
                check(len(shape) == 2 and p["begin"] == 0 and p["count"] == n,
                      where + ": transposed but not a whole 2-D tensor")
                check(eshape == shape[::-1], where + ": transposed entry has shape %s" % eshape)
                rows, cols = shape  # the entry is [cols, rows]
                values = [values[i * rows + o] for o in range(rows) for i in range(cols)]
            else:
                check(eshape == [p["count"]] or (p["file"] == "model.safetensors" and eshape == shape),
                      where + ": entry has shape %s" % eshape)
            for i, v in zip(whole_indices(shape, p, where), values):
                check(flat[i] is None, where + ": overlaps another piece at element %d" % i)
                flat[i] = v
        gaps = flat.count(None)
        check(gaps == 0, "%s: pieces cover %d of %d elements" % (key, n - gaps, n))
        tensors[key], total = flat, total + n

    params = [k for k in tensors if not k.startswith("optimizer.")]
    optim = [k for k in tensors if k.startswith("optimizer.")]
    states = (manifest.get("optimizer") or {}).get("state_names", [])
    for key in optim:
        t = manifest["tensors"][key]
        state, _, param = key[len("optimizer."):].partition(".")
        check(state in states, "%s: state %s not in the manifest's state_names" % (key, state))
        check(param in tensors and manifest["tensors"][param]["shape"] == t["shape"],
              "%s: no parameter %s of the same shape" % (key, param))
        check(isinstance(t.get("step"), int), "%s: no integer step" % key)

    if kind == "FULL_STATE_DICT":
        check("model.safetensors" in files, "FULL_STATE_DICT without model.safetensors")
        meta, entries = files["model.safetensors"]
        check(meta.get("format") == "pt", "model.safetensors: __metadata__ is %s" % meta)
        for key in params:
            t = manifest["tensors"][key]
            check(key in entries, "model.safetensors: no entry " + key)
            transposed = any(p.get("transposed", False) for p in t["pieces"])
            want = t["shape"][::-1] if transposed else t["shape"]
            check(entries[key][1] == want, "model.safetensors: %s has shape %s, expected %s"
                  % (key, entries[key][1], want))

    print("%s: version %d, %s, %d tensors (%d parameters, %d optimizer state), %d elements, %d files"
          % (root, manifest["version"], kind, len(tensors), len(params), len(optim), total, len(files)))
    for key in params[:3]:
        print("  %s %s: %s" % (key, manifest["tensors"][key]["shape"],
                               ", ".join("%.6g" % v for v in tensors[key][:3])))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Bad as e:
        print("read_checkpoint: %s" % e, file=sys.stderr)
        sys.exit(1)
    except (KeyError, TypeError, ValueError, struct.error) as e:
        print("read_checkpoint: malformed manifest or file (%s: %s)" % (type(e).__name__, e),
              file=sys.stderr)
        sys.exit(1)
