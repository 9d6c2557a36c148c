"""The ctypes layer over libdcr: finding and loading the library, the structs of
include/dcr.h mirrored field for field, and every function's prototype.

Nothing here is public API: use the names that :mod:`dcr` exports.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_int,
    c_size_t,
    c_uint,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import List, Optional, Tuple

# The version of include/dcr.h this package was written for (DCR_VERSION_MAJOR,
# _MINOR, _PATCH and DCR_ABI_VERSION). tests/test_version.py checks them against the
# header, so that they cannot drift apart.
VERSION_MAJOR = 0
VERSION_MINOR = 1
VERSION_PATCH = 0
ABI_VERSION = 1
FORMAT_MAJOR = 1
FORMAT_MINOR = 3
VERSION_NUMBER = VERSION_MAJOR * 10000 + VERSION_MINOR * 100 + VERSION_PATCH
VERSION_STRING = f"{VERSION_MAJOR}.{VERSION_MINOR}.{VERSION_PATCH}"
SONAME = f"libdcr.so.{ABI_VERSION}"

NONE = 2**64 - 1  # DCR_NONE: a detail field that does not apply

# ---- structs (include/dcr.h, in its order) -----------------------------------------


class Detail(Structure):
    """dcr_detail."""

    _fields_ = [
        ("code", c_int),
        ("file", c_char * 256),
        ("offset", c_uint64),
        ("section", c_char * 5),
        ("tensor", c_uint64),
        ("tensor_name", c_char * 128),
        ("chunk", c_uint64),
        ("message", c_char * 256),
    ]


class Limits(Structure):
    """dcr_limits."""

    _fields_ = [
        ("max_tensors", c_uint64),
        ("max_name_length", c_uint64),
        ("max_rank", c_uint64),
        ("max_chunk_size", c_uint64),
        ("max_section_size", c_uint64),
        ("max_header_size", c_uint64),
        ("max_file_size", c_uint64),
        ("max_bundle_size", c_uint64),
        ("max_memory", c_uint64),
        ("cancel", c_void_p),
        ("reserved_", c_uint64 * 6),
    ]


class Meta(Structure):
    """dcr_meta."""

    _fields_ = [("key", c_char_p), ("value", c_char_p)]


PROGRESS_FN = CFUNCTYPE(None, c_void_p, c_uint64, c_uint64)
WRITE_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)


class EncodeOptions(Structure):
    """dcr_encode_options."""

    _fields_ = [
        ("chunk_size", c_uint32),
        ("level", c_int),
        ("threads", c_uint),
        ("raw", c_int),
        ("meta", POINTER(Meta)),
        ("meta_count", c_size_t),
        ("progress", PROGRESS_FN),
        ("progress_opaque", c_void_p),
        ("cancel", POINTER(c_int)),
        ("no_replace", c_int),
        ("no_sync", c_int),
        ("max_memory", c_uint64),
        ("unrelated", c_int),
        ("max_minor", c_int),
        ("sign_key", c_char_p),
        ("sliced", POINTER(c_char_p)),
        ("sliced_count", c_size_t),
        ("sign_scope", c_int),
        ("reserved_", c_uint64 * 1),
    ]


class EncodeStatsC(Structure):
    """dcr_encode_stats."""

    _fields_ = [
        ("bundle_size", c_uint64),
        ("target_size", c_uint64),
        ("elements", c_uint64),
        ("changed_elements", c_uint64),
        ("chunks", c_uint64),
        ("changed_chunks", c_uint64),
        ("chunks_by_encoding", c_uint64 * 7),
        ("tensors_added", c_uint64),
        ("tensors_removed", c_uint64),
        ("tensors_recoded", c_uint64),
        ("tensors_resized", c_uint64),
        ("format_minor", c_uint64),
        ("chunks_delta_classed", c_uint64),
        ("chunks_delta_banded", c_uint64),
        ("reserved_", c_uint64 * 4),
    ]


class BundleInfoC(Structure):
    """dcr_bundle_info."""

    _fields_ = [
        ("format_major", c_uint),
        ("format_minor", c_uint),
        ("bundle_size", c_uint64),
        ("kind", c_int),
        ("chunk_size", c_uint32),
        ("entry_count", c_uint64),
        ("chunk_count", c_uint64),
        ("prefix_length", c_uint64),
        ("target_size", c_uint64),
        ("base_state", c_uint8 * 16),
        ("target_state", c_uint8 * 16),
        ("meta_count", c_uint64),
        ("section_count", c_uint64),
        ("member_count", c_uint64),
        ("reserved_", c_uint64 * 7),
    ]


class TensorSideC(Structure):
    """dcr_tensor_side."""

    _fields_ = [
        ("present", c_int),
        ("dtype", c_int),
        ("rank", c_uint),
        ("dims", POINTER(c_uint64)),
        ("byte_length", c_uint64),
        ("offset", c_uint64),
        ("hash", c_uint8 * 16),
    ]


class TensorInfoC(Structure):
    """dcr_tensor_info."""

    _fields_ = [
        ("name", c_void_p),  # not NUL-terminated: name_length bytes
        ("name_length", c_size_t),
        ("base", TensorSideC),
        ("target", TensorSideC),
        ("delta_coded", c_int),
        ("resized", c_int),
        ("selected", c_int),
        ("raw", c_uint32),
        ("reserved_", c_uint64 * 3),
    ]


class MemberInfoC(Structure):
    """dcr_member_info."""

    _fields_ = [
        ("path", c_void_p),  # not NUL-terminated: path_length bytes
        ("path_length", c_size_t),
        ("kind", c_int),
        ("prefix_length", c_uint64),
        ("data_length", c_uint64),
        ("reserved_", c_uint64 * 4),
    ]


class ChunkInfoC(Structure):
    """dcr_chunk_info."""

    _fields_ = [
        ("tensor", c_uint32),
        ("chunk", c_uint32),
        ("encoding", c_int),
        ("compression", c_int),
        ("count", c_uint32),
        ("offset", c_uint64),
        ("payload_length", c_uint64),
        ("base_check", c_uint64),
        ("target_check", c_uint64),
        ("reserved_", c_uint64 * 4),
    ]


class SectionInfoC(Structure):
    """dcr_section_info."""

    _fields_ = [
        ("type", c_char * 5),
        ("critical", c_int),
        ("compression", c_int),
        ("offset", c_uint64),
        ("length", c_uint64),
        ("reserved_", c_uint64 * 4),
    ]


class ApplyOptions(Structure):
    """dcr_apply_options."""

    _fields_ = [
        ("threads", c_uint),
        ("progress", PROGRESS_FN),
        ("progress_opaque", c_void_p),
        ("cancel", POINTER(c_int)),
        ("sync", c_int),
        ("max_target_size", c_uint64),
        ("no_replace", c_int),
        ("reserved32_", c_uint32),
        ("reserved_", c_uint64 * 6),
    ]


class PatchStatsC(Structure):
    """dcr_patch_stats."""

    _fields_ = [
        ("already_target", c_int),
        ("recovered", c_int),
        ("chunks_patched", c_uint64),
        ("bytes_checked", c_uint64),
        ("bytes_written", c_uint64),
        ("journal_bytes", c_uint64),
        ("journal_discarded", c_int),
        ("salvaged", c_int),
        ("chunks_unchecked", c_uint64),
        ("chunks_not_held", c_uint64),
    ]


class PlacementC(Structure):
    """dcr_placement."""

    _fields_ = [
        ("data", c_void_p),
        ("size", c_uint64),
        ("offset", c_uint64),
        ("row_stride", c_uint64),
        ("row0", c_uint64),
        ("rows", c_uint64),
        ("col0", c_uint64),
        ("cols", c_uint64),
        ("reserved_", c_uint64 * 2),
    ]


class BufferC(Structure):
    """dcr_buffer."""

    _fields_ = [("data", c_void_p), ("size", c_uint64)]


class ChangeC(Structure):
    """dcr_change."""

    _fields_ = [
        ("entry", c_uint64),
        ("chunk", c_uint32),
        ("offset", c_uint64),
        ("length", c_uint64),
        ("element_size", c_uint),
        ("op", c_int),
        ("count", c_uint32),
        ("positions", POINTER(c_uint32)),
        ("values", c_void_p),
        ("base_check", c_uint64),
        ("target_check", c_uint64),
    ]


class CheckpointSummaryC(Structure):
    """dcr_checkpoint_summary."""

    _fields_ = [
        ("kind", c_int),
        ("file_size", c_uint64),
        ("prefix_length", c_uint64),
        ("tensor_count", c_uint64),
        ("member_count", c_uint64),
        ("reserved_", c_uint64 * 3),
    ]


class HistoryOptions(Structure):
    """dcr_history_options."""

    _fields_ = [
        ("threads", c_uint),
        ("verify", c_int),
        ("sync", c_int),
        ("no_replace", c_int),
        ("max_target_size", c_uint64),
        ("container", c_int),
        ("keyframe_every", c_uint64),
        ("first_step", c_uint64),
        ("run_id", c_char_p),
        ("temp_dir", c_char_p),
        ("cancel", POINTER(c_int)),
        ("require_signature", c_void_p),  # const struct dcr_keyring *
        ("max_memory", c_uint64),
        ("reserved_", c_uint64 * 6),
    ]


class HistorySummaryC(Structure):
    """dcr_history_summary."""

    _fields_ = [
        ("container", c_int),
        ("version_major", c_uint),
        ("version_minor", c_uint),
        ("member_count", c_uint64),
        ("first_step", c_uint64),
        ("last_step", c_uint64),
        ("keyframe_every", c_uint64),
        ("run_id", c_char_p),
        ("reserved_", c_uint64 * 6),
    ]


class HistoryMemberC(Structure):
    """dcr_history_member."""

    _fields_ = [
        ("kind", c_int),
        ("step", c_uint64),
        ("name", c_char_p),
        ("size", c_uint64),
        ("digest", c_uint8 * 16),
        ("base_state", c_uint8 * 16),
        ("state", c_uint8 * 16),
        ("meta_count", c_uint64),
        ("directory", c_uint32),
        ("reserved32_", c_uint32),
        ("file_count", c_uint64),
        ("reserved_", c_uint64 * 2),
    ]


class SquashOptions(Structure):
    """dcr_squash_options."""

    _fields_ = [
        ("level", c_int),
        ("threads", c_uint),
        ("max_minor", c_int),
        ("no_replace", c_int),
        ("no_sync", c_int),
        ("reserved32_", c_uint32),
        ("progress", PROGRESS_FN),
        ("progress_opaque", c_void_p),
        ("cancel", POINTER(c_int)),
        ("max_memory", c_uint64),
        ("sliced", POINTER(c_char_p)),
        ("sliced_count", c_size_t),
        ("reserved_", c_uint64 * 4),
    ]


KEY_ID_SIZE = 16  # DCR_KEY_ID_SIZE
SIGN_SCOPES = {"checkpoints": 0, "bundle": 1}  # DCR_SIGN_CHECKPOINTS, DCR_SIGN_BUNDLE


class SignOptions(Structure):
    """dcr_sign_options."""

    _fields_ = [
        ("threads", c_uint),
        ("no_sync", c_int),
        ("cancel", POINTER(c_int)),
        ("scope", c_int),
        ("reserved_", c_uint64 * 7),
    ]


class SignatureResultC(Structure):
    """dcr_signature_result."""

    _fields_ = [
        ("present", c_int),
        ("signature_count", c_uint64),
        ("verified_count", c_uint64),
        ("key_id", c_uint8 * KEY_ID_SIZE),
        ("scope", c_int),
        ("reserved_", c_uint64 * 5),
    ]


class HttpOptions(Structure):
    """dcr_http_options."""

    _fields_ = [
        ("headers", POINTER(c_char_p)),
        ("header_count", c_size_t),
        ("retries", c_uint),
        ("timeout_s", c_uint),
        ("inflight", c_uint),
        ("ca_file", c_char_p),
        ("whole", c_int),
        ("header_follow", c_uint),
        ("deadline_s", c_uint),
        ("low_speed", c_uint),
        ("cancel", c_void_p),
        ("reserved_", c_uint64 * 5),
    ]


class FetchStatsC(Structure):
    """dcr_fetch_stats."""

    _fields_ = [
        ("bundle_size", c_uint64),
        ("bytes_fetched", c_uint64),
        ("requests", c_uint64),
        ("retries", c_uint64),
        ("reserved_", c_uint64 * 4),
    ]


# The C name of each mirrored struct, for the layout test (tests/test_abi.py).
STRUCTS = {
    "dcr_detail": Detail,
    "dcr_limits": Limits,
    "dcr_meta": Meta,
    "dcr_encode_options": EncodeOptions,
    "dcr_encode_stats": EncodeStatsC,
    "dcr_bundle_info": BundleInfoC,
    "dcr_tensor_side": TensorSideC,
    "dcr_tensor_info": TensorInfoC,
    "dcr_member_info": MemberInfoC,
    "dcr_chunk_info": ChunkInfoC,
    "dcr_section_info": SectionInfoC,
    "dcr_apply_options": ApplyOptions,
    "dcr_patch_stats": PatchStatsC,
    "dcr_buffer": BufferC,
    "dcr_placement": PlacementC,
    "dcr_change": ChangeC,
    "dcr_checkpoint_summary": CheckpointSummaryC,
    "dcr_history_options": HistoryOptions,
    "dcr_history_summary": HistorySummaryC,
    "dcr_history_member": HistoryMemberC,
    "dcr_squash_options": SquashOptions,
    "dcr_sign_options": SignOptions,
    "dcr_signature_result": SignatureResultC,
    "dcr_http_options": HttpOptions,
    "dcr_fetch_stats": FetchStatsC,
}

RESOLVE_FN = CFUNCTYPE(c_int, c_void_p, c_uint64, POINTER(TensorInfoC), POINTER(BufferC))
PLACE_FN = CFUNCTYPE(c_int, c_void_p, c_uint64, POINTER(TensorInfoC), POINTER(POINTER(PlacementC)),
                     POINTER(c_size_t))
PROBLEM_FN = CFUNCTYPE(c_int, c_void_p, POINTER(Detail))

# ---- loading -----------------------------------------------------------------------


def _candidates() -> List[Tuple[str, str]]:
    """Where to look for libdcr, in order, as (path or name, where it came from)."""
    out: List[Tuple[str, str]] = []
    env = os.environ.get("DCR_LIBRARY")
    if env:
        return [(env, "DCR_LIBRARY")]
    here = os.path.dirname(os.path.abspath(__file__))
    local = os.path.join(here, SONAME)
    if os.path.exists(local):
        out.append((local, "a copy installed with the package"))
    out.append((SONAME, "the system's library search path"))
    found = ctypes.util.find_library("dcr")
    if found and found != SONAME:
        out.append((found, "ctypes.util.find_library('dcr')"))
    return out


def _load() -> Tuple[ctypes.CDLL, str]:
    errors: List[str] = []
    for name, origin in _candidates():
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            errors.append(f"  {name} ({origin}): {e}")
    raise ImportError(
        "dcr: cannot load libdcr, the DCR library this package binds. Tried:\n"
        + "\n".join(errors)
        + f"\nBuild it (make lib) and set DCR_LIBRARY=/path/to/{SONAME}, or install it "
        "(make install; ldconfig)."
    )


lib, path = _load()

_F = [
    # name, restype, argtypes
    ("dcr_version_number", c_uint, []),
    ("dcr_version_string", c_char_p, []),
    ("dcr_error_name", c_char_p, [c_int]),
    ("dcr_error_message", c_char_p, [c_int]),
    ("dcr_limits_default", None, [POINTER(Limits)]),
    ("dcr_dtype_from_name", c_int, [c_char_p, c_size_t]),
    ("dcr_dtype_name", c_char_p, [c_int]),
    ("dcr_dtype_size", c_uint, [c_int]),
    ("dcr_dtype_bits", c_uint, [c_int]),
    ("dcr_encoding_name", c_char_p, [c_int]),
    ("dcr_default_threads", c_uint, []),
    ("dcr_encode_options_default", None, [POINTER(EncodeOptions)]),
    (
        "dcr_encode",
        c_int,
        [c_char_p, c_char_p, POINTER(EncodeOptions), WRITE_FN, c_void_p, POINTER(EncodeStatsC), POINTER(Detail)],
    ),
    (
        "dcr_encode_file",
        c_int,
        [c_char_p, c_char_p, c_char_p, POINTER(EncodeOptions), POINTER(EncodeStatsC), POINTER(Detail)],
    ),
    ("dcr_reader_open_file", c_int, [POINTER(c_void_p), c_char_p, POINTER(Limits), POINTER(Detail)]),
    ("dcr_reader_open_memory", c_int, [POINTER(c_void_p), c_void_p, c_size_t, POINTER(Limits), POINTER(Detail)]),
    ("dcr_http_options_default", None, [POINTER(HttpOptions)]),
    ("dcr_reader_open_url", c_int, [POINTER(c_void_p), c_char_p, POINTER(HttpOptions), POINTER(Limits), POINTER(Detail)]),
    ("dcr_reader_fetch_stats", None, [c_void_p, POINTER(FetchStatsC), c_size_t]),
    ("dcr_reader_select_tensors", c_int, [c_void_p, POINTER(c_char_p), c_size_t, POINTER(c_uint64), POINTER(Detail)]),
    ("dcr_reader_free", None, [c_void_p]),
    ("dcr_reader_info", None, [c_void_p, POINTER(BundleInfoC)]),
    ("dcr_reader_tensor", None, [c_void_p, c_uint64, POINTER(TensorInfoC)]),
    ("dcr_reader_member", None, [c_void_p, c_uint64, POINTER(MemberInfoC)]),
    ("dcr_reader_chunk", None, [c_void_p, c_uint64, POINTER(ChunkInfoC)]),
    ("dcr_reader_section", None, [c_void_p, c_uint64, POINTER(SectionInfoC)]),
    ("dcr_reader_meta", None, [c_void_p, c_uint64, POINTER(Meta)]),
    ("dcr_reader_set_threads", None, [c_void_p, c_uint]),
    ("dcr_reader_set_cancel", None, [c_void_p, POINTER(c_int)]),
    ("dcr_reader_set_progress", None, [c_void_p, PROGRESS_FN, c_void_p]),
    ("dcr_reader_verify", c_int, [c_void_p, POINTER(Detail)]),
    ("dcr_reader_verify_all", c_int, [c_void_p, PROBLEM_FN, c_void_p]),
    ("dcr_apply_options_default", None, [POINTER(ApplyOptions)]),
    ("dcr_apply", c_int, [c_void_p, c_char_p, c_char_p, POINTER(ApplyOptions), POINTER(Detail)]),
    ("dcr_check_target", c_int, [c_void_p, c_char_p, POINTER(ApplyOptions), POINTER(Detail)]),
    ("dcr_patch_create", c_int, [POINTER(c_void_p), c_void_p, POINTER(Detail)]),
    ("dcr_patch_free", None, [c_void_p]),
    ("dcr_patch_set_verify", c_int, [c_void_p, c_int]),
    ("dcr_patch_set_threads", None, [c_void_p, c_uint]),
    ("dcr_patch_set_progress", None, [c_void_p, PROGRESS_FN, c_void_p]),
    ("dcr_patch_set_cancel", None, [c_void_p, POINTER(c_int)]),
    ("dcr_patch_set_sync", None, [c_void_p, c_int]),
    ("dcr_patch_set_salvage", None, [c_void_p, c_int]),
    ("dcr_patch_stats_get", None, [c_void_p, POINTER(PatchStatsC), c_size_t]),
    ("dcr_patch_memory", c_int, [c_void_p, RESOLVE_FN, c_void_p, POINTER(Detail)]),
    ("dcr_patch_placed", c_int, [c_void_p, PLACE_FN, c_void_p, POINTER(Detail)]),
    ("dcr_patch_set_base", None, [c_void_p, RESOLVE_FN, c_void_p]),
    ("dcr_patch_file", c_int, [c_void_p, c_char_p, POINTER(Detail)]),
    ("dcr_journal_recover", c_int, [c_char_p, c_int, POINTER(c_int), POINTER(Detail)]),
    ("dcr_changes_open", c_int, [POINTER(c_void_p), c_void_p, POINTER(Detail)]),
    ("dcr_changes_next", c_int, [c_void_p, POINTER(POINTER(ChangeC)), POINTER(Detail)]),
    ("dcr_changes_free", None, [c_void_p]),
    ("dcr_changes_set_base", None, [c_void_p, RESOLVE_FN, c_void_p]),
    ("dcr_change_apply", c_int, [POINTER(ChangeC), c_void_p, c_size_t, POINTER(Detail)]),
    ("dcr_checkpoint_open", c_int, [POINTER(c_void_p), c_char_p, c_int, POINTER(Limits), POINTER(Detail)]),
    ("dcr_checkpoint_free", None, [c_void_p]),
    ("dcr_checkpoint_info", None, [c_void_p, POINTER(CheckpointSummaryC)]),
    ("dcr_checkpoint_member", None, [c_void_p, c_uint64, POINTER(MemberInfoC)]),
    ("dcr_checkpoint_tensor", None, [c_void_p, c_uint64, POINTER(TensorSideC), POINTER(c_void_p), POINTER(c_size_t)]),
    ("dcr_checkpoint_set_cancel", None, [c_void_p, POINTER(c_int)]),
    ("dcr_checkpoint_set_progress", None, [c_void_p, PROGRESS_FN, c_void_p]),
    ("dcr_checkpoint_state_id", c_int, [c_void_p, c_uint, POINTER(c_uint8 * 16), POINTER(Detail)]),
    ("dcr_history_options_default", None, [POINTER(HistoryOptions)]),
    ("dcr_history_open", c_int, [POINTER(c_void_p), c_char_p, POINTER(Limits), POINTER(Detail)]),
    (
        "dcr_history_open_url",
        c_int,
        [POINTER(c_void_p), c_char_p, POINTER(HttpOptions), POINTER(Limits), POINTER(Detail)],
    ),
    ("dcr_history_free", None, [c_void_p]),
    ("dcr_history_info", None, [c_void_p, POINTER(HistorySummaryC)]),
    ("dcr_history_member_get", None, [c_void_p, c_uint64, POINTER(HistoryMemberC)]),
    ("dcr_history_member_meta", None, [c_void_p, c_uint64, c_uint64, POINTER(Meta)]),
    ("dcr_history_find_state", c_int, [c_void_p, POINTER(c_uint8 * 16), POINTER(c_uint64), POINTER(Detail)]),
    ("dcr_history_extract", c_int, [c_void_p, c_uint64, c_char_p, POINTER(HistoryOptions), POINTER(Detail)]),
    ("dcr_history_verify", c_int, [c_void_p, POINTER(HistoryOptions), POINTER(Detail)]),
    (
        "dcr_history_create",
        c_int,
        [c_char_p, c_char_p, POINTER(c_char_p), c_size_t, POINTER(HistoryOptions), POINTER(Detail)],
    ),
    ("dcr_history_append", c_int, [c_char_p, POINTER(c_char_p), c_size_t, POINTER(HistoryOptions), POINTER(Detail)]),
    ("dcr_history_recover", c_int, [c_char_p, POINTER(HistoryOptions), POINTER(c_int), POINTER(Detail)]),
    ("dcr_squash_options_default", None, [POINTER(SquashOptions)]),
    (
        "dcr_squash",
        c_int,
        [POINTER(c_char_p), c_size_t, c_char_p, c_char_p, POINTER(SquashOptions), POINTER(EncodeStatsC),
         POINTER(Detail)],
    ),
    ("dcr_keygen", c_int, [c_char_p, c_char_p, POINTER(c_uint8 * KEY_ID_SIZE), POINTER(Detail)]),
    ("dcr_keyring_create", c_int, [POINTER(c_void_p), POINTER(Detail)]),
    ("dcr_keyring_add_file", c_int, [c_void_p, c_char_p, POINTER(c_uint8 * KEY_ID_SIZE), POINTER(Detail)]),
    ("dcr_keyring_free", None, [c_void_p]),
    ("dcr_sign_options_default", None, [POINTER(SignOptions)]),
    (
        "dcr_sign_file",
        c_int,
        [c_char_p, c_char_p, c_char_p, c_char_p, c_char_p, POINTER(SignOptions), POINTER(Detail)],
    ),
    ("dcr_reader_verify_signature", c_int, [c_void_p, c_void_p, POINTER(SignatureResultC), POINTER(Detail)]),
    ("dcr_reader_verify_signed_checkpoint", c_int, [c_void_p, c_void_p, c_char_p, c_int, c_uint, POINTER(Detail)]),
]


def _check_version() -> None:
    try:
        fn = lib.dcr_version_number
    except AttributeError:
        raise ImportError(f"dcr: {path} is not libdcr (it has no dcr_version_number)") from None
    fn.restype, fn.argtypes = c_uint, []
    have = int(fn())
    major, minor, patch = have // 10000, have // 100 % 100, have % 100
    if (major, minor) != (VERSION_MAJOR, VERSION_MINOR):
        raise ImportError(
            f"dcr: the loaded libdcr ({path}) is version {major}.{minor}.{patch}, but this "
            f"Python package was written for libdcr {VERSION_STRING} (ABI {ABI_VERSION}); "
            f"install the matching library, or point DCR_LIBRARY at it"
        )


_check_version()
_missing: List[str] = []
for _name, _res, _args in _F:
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        _missing.append(_name)
        continue
    _fn.restype, _fn.argtypes = _res, _args
if _missing:
    raise ImportError(f"dcr: {path} lacks the functions {', '.join(_missing)}: not libdcr {VERSION_STRING}")


def library_version() -> str:
    """The version string of the libdcr actually loaded."""
    s: Optional[bytes] = lib.dcr_version_string()
    return (s or b"").decode()
