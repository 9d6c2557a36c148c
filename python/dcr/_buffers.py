"""Raw memory of the caller's arrays: numpy arrays, objects with
``__array_interface__``, DLPack producers (``__dlpack__``: a torch, JAX or CuPy
tensor; only CPU memory is accepted) and the buffer protocol. Nothing here imports
torch: a CPU tensor is read through DLPack."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ._errors import argument_error

# safetensors dtype names for numpy dtypes (little-endian or byte-sized).
_NUMPY_DTYPES = {
    "bool": "BOOL",
    "uint8": "U8",
    "int8": "I8",
    "uint16": "U16",
    "int16": "I16",
    "uint32": "U32",
    "int32": "I32",
    "uint64": "U64",
    "int64": "I64",
    "float16": "F16",
    "float32": "F32",
    "float64": "F64",
    # ml_dtypes' extension types, where installed
    "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}

# DLPack (type code, bits) -> safetensors dtype name.
_DLPACK_DTYPES = {
    (0, 8): "I8", (0, 16): "I16", (0, 32): "I32", (0, 64): "I64",
    (1, 8): "U8", (1, 16): "U16", (1, 32): "U32", (1, 64): "U64",
    (2, 16): "F16", (2, 32): "F32", (2, 64): "F64",
    (4, 16): "BF16",
    (6, 8): "BOOL",
}
_KDLCPU, _KDLCUDAHOST, _KDLCUDAMANAGED = 1, 3, 13


@dataclass
class Region:
    """The bytes of one array: where they are, how many, and whether they may be
    written. ``keep`` holds what keeps the memory alive (a DLPack capsule...)."""

    address: int
    nbytes: int
    writable: bool
    keep: Any
    dtype: Optional[str] = None  # safetensors dtype name, where known
    shape: Optional[Tuple[int, ...]] = None
    strides: Optional[Tuple[int, ...]] = None  # in bytes; None: C-contiguous
    itemsize: int = 1


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _contiguous(shape: Tuple[int, ...], strides: Optional[Tuple[int, ...]], itemsize: int) -> bool:
    """Whether strides (in bytes) are those of a C-contiguous array of shape."""
    if strides is None or 0 in shape:
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


# _numpy_dtype_name's answers by dtype: dtype.name is computed in Python on every
# call, which costs more than the rest of a region when hundreds of tensors are
# placed. Filled as dtypes are met (ml_dtypes' types exist only once imported).
_BY_NUMPY_DTYPE: Dict[np.dtype, Optional[str]] = {}


def _numpy_dtype_name(dt: np.dtype) -> Optional[str]:
    try:
        return _BY_NUMPY_DTYPE[dt]
    except KeyError:
        name = None if dt.itemsize > 1 and dt.byteorder == ">" else _NUMPY_DTYPES.get(dt.name)
        _BY_NUMPY_DTYPE[dt] = name
        return name


def _from_ndarray(a: np.ndarray, what: str, strided: bool = False) -> Region:
    if a.dtype.itemsize > 1 and a.dtype.byteorder == ">":
        raise argument_error(f"{what} is a big-endian array ({a.dtype}): tensors are little-endian", what_name(what))
    if not strided and not a.flags.c_contiguous:
        raise argument_error(
            f"{what} is not C-contiguous (strides {a.strides} for shape {a.shape}): "
            "the library patches whole chunks of its bytes in place; pass "
            "numpy.ascontiguousarray(...) and copy the result back",
            what_name(what),
        )
    return Region(
        address=a.__array_interface__["data"][0],
        nbytes=a.nbytes,
        writable=bool(a.flags.writeable),
        keep=a,
        dtype=_numpy_dtype_name(a.dtype),
        shape=tuple(a.shape),
        strides=tuple(a.strides),
        itemsize=a.dtype.itemsize,
    )


def what_name(what: str) -> Optional[str]:
    """The tensor name inside a ``tensor "NAME"`` description, for the detail."""
    if what.startswith('tensor "') and what.endswith('"'):
        return what[8:-1]
    return None


def _from_array_interface(obj: Any, ai: dict, what: str, strided: bool = False) -> Region:
    data = ai.get("data")
    if not isinstance(data, tuple):
        # data is a buffer object (or None: the object's own buffer): let numpy read it
        return _from_ndarray(np.asarray(obj), what, strided)
    shape = tuple(int(n) for n in ai["shape"])
    dt = np.dtype(ai["typestr"])
    strides = ai.get("strides")
    if not strided and not _contiguous(shape, None if strides is None else tuple(strides), dt.itemsize):
        raise argument_error(
            f"{what} is not C-contiguous (strides {tuple(strides)} for shape {shape}): "
            "the library patches whole chunks of its bytes in place",
            what_name(what),
        )
    if dt.itemsize > 1 and dt.byteorder == ">":
        raise argument_error(f"{what} is big-endian ({ai['typestr']}): tensors are little-endian", what_name(what))
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize if shape else dt.itemsize
    return Region(int(data[0] or 0), n, not data[1], obj, _numpy_dtype_name(dt), shape,
                  None if strides is None else tuple(int(x) for x in strides), dt.itemsize)


def _from_dlpack(obj: Any, what: str, strided: bool = False) -> Region:
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None:
        device_type = int(dev()[0])
        if device_type not in (_KDLCPU, _KDLCUDAHOST, _KDLCUDAMANAGED):
            raise argument_error(
                f"{what} is not in CPU memory (DLPack device type {device_type}): copy it to "
                "the CPU, or scatter bundle.changes() into device memory yourself",
                what_name(what),
            )
    try:
        capsule = obj.__dlpack__()
    except Exception as e:  # torch refuses tensors that require grad: use a detached view
        detach = getattr(obj, "detach", None)
        if detach is None:
            raise argument_error(f"{what}: __dlpack__() failed: {e}", what_name(what)) from e
        obj = detach()
        capsule = obj.__dlpack__()
    if not _capsule_valid(capsule, b"dltensor"):
        raise argument_error(f"{what}: __dlpack__() did not return an unused DLPack capsule", what_name(what))
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    if t.device.device_type not in (_KDLCPU, _KDLCUDAHOST, _KDLCUDAMANAGED):
        raise argument_error(
            f"{what} is not in CPU memory (DLPack device type {t.device.device_type})", what_name(what)
        )
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    bits = t.dtype.bits * t.dtype.lanes
    count = 1
    for n in shape:
        count *= n
    strides = None
    if bits % 8 == 0:
        strides = tuple(int(t.strides[i]) * bits // 8 for i in range(t.ndim)) if t.strides else None
        if not strided and not _contiguous(shape, strides, bits // 8):
            raise argument_error(
                f"{what} is not contiguous (strides {tuple(s * 8 // bits for s in strides or ())} "
                f"for shape {shape}): the library patches whole chunks of its bytes in place; "
                "pass .contiguous() and copy the result back",
                what_name(what),
            )
    dtype = _DLPACK_DTYPES.get((t.dtype.code, t.dtype.bits)) if t.dtype.lanes == 1 else None
    # Legacy DLPack has no read-only flag: a producer that exports memory is taken
    # at its word that it may be written (torch and JAX CPU arrays may be).
    return Region(int(t.data or 0) + int(t.byte_offset), (count * bits + 7) // 8, True, (obj, capsule), dtype, shape,
                  strides, max(bits // 8, 1))


def _from_buffer(obj: Any, what: str, strided: bool = False) -> Region:
    try:
        mv = memoryview(obj)
    except TypeError:
        raise argument_error(
            f"{what} is a {type(obj).__name__}, not an array: give a numpy array, a CPU "
            "tensor (DLPack), or an object with __array_interface__ or the buffer protocol",
            what_name(what),
        ) from None
    if not mv.c_contiguous:  # strided or not: a strided buffer's first byte is not at hand
        raise argument_error(f"{what} is a buffer that is not C-contiguous", what_name(what))
    a = np.frombuffer(mv, dtype=np.uint8) if mv.nbytes else np.empty(0, np.uint8)
    dtype = None
    try:
        dtype = _numpy_dtype_name(np.asarray(mv).dtype)
    except (TypeError, ValueError):
        pass
    return Region(a.__array_interface__["data"][0], mv.nbytes, not mv.readonly, (mv, a), dtype, tuple(mv.shape),
                  tuple(mv.strides), mv.itemsize)


def region(obj: Any, what: str, strided: bool = False) -> Region:
    """The bytes of obj, which must be CPU memory, C-contiguous unless ``strided``
    (then ``strides`` says where its elements are, from ``address``: the first)."""
    if isinstance(obj, np.ndarray):
        return _from_ndarray(obj, what, strided)
    ai = getattr(obj, "__array_interface__", None)
    if isinstance(ai, dict):
        return _from_array_interface(obj, ai, what, strided)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, what, strided)
    return _from_buffer(obj, what, strided)
