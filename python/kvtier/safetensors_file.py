"""A small reader and writer of safetensors files (PyTorch CPU tensors), and the raw-bytes
helpers the kvtier tensor calls share with it.

The format: an unsigned 64-bit little-endian length N; N bytes of UTF-8 JSON mapping each
tensor name to ``{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}`` (offsets
into the data that follows the header), with an optional ``"__metadata__"`` of string to
string, padded with spaces to a multiple of 8; then the tensors' bytes, little-endian, C order,
back to back (the format of the ``safetensors`` package, which Debian does not ship).
torch is imported on first use.
"""

import json
import struct

_LENGTH = struct.Struct("<Q")
_MAX_HEADER_BYTES = 100 << 20  # as the safetensors package: a larger header is not a header
_METADATA = "__metadata__"
_DTYPES = (  # safetensors name, torch attribute (absent from older torch: uint16, float8)
    ("BOOL", "bool"), ("U8", "uint8"), ("I8", "int8"), ("I16", "int16"), ("U16", "uint16"),
    ("I32", "int32"), ("U32", "uint32"), ("I64", "int64"), ("U64", "uint64"),
    ("F16", "float16"), ("BF16", "bfloat16"), ("F32", "float32"), ("F64", "float64"),
    ("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2"),
)


def import_torch():
    """The torch module; ImportError with the package to install when it is missing."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("kvtier's tensor calls need PyTorch (python3-torch)") from e
    return torch


def tensor_to_bytes(tensor):
    """The bytes of a CPU tensor in C order, as a bytes-like object (no copy when the tensor
    is contiguous). Raises TypeError for a non-tensor, ValueError for a non-CPU tensor."""
    torch = import_torch()
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, not {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise ValueError("only CPU tensors are supported (no GPU path in the kvtier store yet)")
    flat = tensor.detach().contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else b""


def element_size(dtype):
    """Bytes per element of a torch dtype."""
    return import_torch().empty((), dtype=dtype).element_size()


def tensor_from_bytes(buffer, dtype, shape):
    """A tensor of `dtype` and `shape` over `buffer`, which holds exactly its bytes. It views
    a writable buffer (no copy) and copies a read-only one (torch keeps no read-only tensors)."""
    torch = import_torch()
    view = memoryview(buffer).cast("B")
    if view.nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    if view.readonly:
        view = bytearray(view)
    return torch.frombuffer(view, dtype=torch.uint8).view(dtype).reshape(shape)


def _dtype_tables():
    torch = import_torch()
    pairs = [(name, getattr(torch, attr)) for name, attr in _DTYPES if hasattr(torch, attr)]
    return dict(pairs), {dtype: name for name, dtype in pairs}


def save_file(tensors, path, metadata=None):
    """Writes `tensors` ({name: CPU tensor}) to a safetensors file at `path`, in the dict's
    order, with the optional `metadata` ({str: str}). Returns None; raises TypeError or
    ValueError for a bad argument, OSError when the file cannot be written."""
    _, names = _dtype_tables()
    header, payloads, offset = {}, [], 0
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("safetensors metadata must map str to str")
        header[_METADATA] = dict(metadata)
    for name, tensor in tensors.items():
        if not isinstance(name, str) or name == _METADATA:
            raise ValueError(f"bad tensor name {name!r}")
        data = tensor_to_bytes(tensor)
        if tensor.dtype not in names:
            raise ValueError(f"{name}: dtype {tensor.dtype} has no safetensors name")
        size = memoryview(data).nbytes
        header[name] = {"dtype": names[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + size]}
        payloads.append(data)
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(_LENGTH.pack(len(text)))
        f.write(text)
        for data in payloads:
            f.write(data)


def load_file(path):
    """The tensors of the safetensors file at `path`: {name: tensor (its own memory)}, in the
    order of their bytes in the file. Raises ValueError naming what is wrong when the file is
    not a valid safetensors file, OSError when it cannot be read."""
    with open(path, "rb") as f:
        raw = f.read()
    header, data = _split(raw)
    dtypes, _ = _dtype_tables()
    entries = sorted(((name, _entry(name, spec, dtypes)) for name, spec in header.items()
                      if name != _METADATA), key=lambda e: e[1][2:])
    end = 0
    for name, (_, _, begin, stop) in entries:
        if begin != end:  # the safetensors rule: tensors tile the data, no gaps or overlaps
            raise ValueError(f"{name}: data starts at {begin}, expected {end}")
        end = stop
    if end != len(data):
        raise ValueError(f"the tensors cover {end} bytes of data, the file holds {len(data)}")
    return {name: tensor_from_bytes(bytearray(data[begin:stop]), dtype, shape)
            for name, (dtype, shape, begin, stop) in entries}


def _split(raw):
    """(header dict, memoryview of the data section) of a file's bytes."""
    if len(raw) < _LENGTH.size:
        raise ValueError(f"a safetensors file has at least {_LENGTH.size} bytes, not {len(raw)}")
    (length,) = _LENGTH.unpack_from(raw)
    if length > min(_MAX_HEADER_BYTES, len(raw) - _LENGTH.size):
        raise ValueError(f"header length {length} exceeds the file ({len(raw)} bytes)")
    try:
        header = json.loads(raw[_LENGTH.size:_LENGTH.size + length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"the header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    metadata = header.get(_METADATA, {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ValueError("__metadata__ must map str to str")
    return header, memoryview(raw)[_LENGTH.size + length:]


def _entry(name, spec, dtypes):
    """(torch dtype, shape, begin, end) of one header entry, checked for consistency."""
    if not isinstance(spec, dict):
        raise ValueError(f"{name}: the entry is not a JSON object")
    dtype = dtypes.get(spec.get("dtype"))
    if dtype is None:
        raise ValueError(f"{name}: unknown or unsupported dtype {spec.get('dtype')!r}")
    shape, offsets = spec.get("shape"), spec.get("data_offsets")
    if not _ints(shape):
        raise ValueError(f"{name}: shape {shape!r} is not a list of non-negative ints")
    if not _ints(offsets) or len(offsets) != 2 or offsets[0] > offsets[1]:
        raise ValueError(f"{name}: data_offsets {offsets!r} is not [begin, end]")
    count = 1
    for n in shape:
        count *= n
    if offsets[1] - offsets[0] != count * element_size(dtype):
        raise ValueError(f"{name}: {offsets[1] - offsets[0]} bytes for shape {shape} of "
                         f"{spec['dtype']}")
    return dtype, shape, offsets[0], offsets[1]


def _ints(value):
    return isinstance(value, list) and all(type(n) is int and n >= 0 for n in value)
