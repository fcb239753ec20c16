"""PyTorch's memory API for any Python program that runs under cuprof.

``import cuprof`` in a program started by ``cuprof run`` (or with libcuprof.so in LD_PRELOAD)
gives the calls ``torch.cuda.memory`` has, with the same names, signatures and meanings, answered
by cuprof for every device allocation the program makes (CuPy, JAX, Numba, cuda-python, ctypes
on libcudart, PyTorch itself):

    memory_allocated, max_memory_allocated, memory_reserved, max_memory_reserved,
    memory_stats, memory_summary, reset_peak_memory_stats, reset_accumulated_memory_stats,
    empty_cache, set_per_process_memory_fraction, _record_memory_history, _snapshot,
    _dump_snapshot

and ``annotate(name)``: a range ("forward") as a context manager or a decorator, shown as a
phase by ``cuprof summary``, ``plot`` and ``timeline`` (the snapshot's external_annotations, as
PyTorch's record_function ranges); ``mark(name)`` marks one point.

``device`` is a device index, a "cuda:N" or "cuda" string, an object with ``type == "cuda"``
and ``index`` (torch.device), or None for the calling thread's current device.

cuprof never initializes CUDA itself: before the program's first CUDA call the counters are 0,
resets and empty_cache do nothing, annotations and _record_memory_history take effect when the
program starts using CUDA, and device_count, set_per_process_memory_fraction, _snapshot and
_dump_snapshot raise CuprofError.

Importing this module where libcuprof.so is not loaded raises ``NotLoadedError`` (an
ImportError). A call cuprof cannot answer raises ``CuprofError`` (a RuntimeError): cuprof in off
mode, no CUDA device, a device that does not exist. The module is a thin layer over cuprof.h's
C functions (ctypes), with no logic of its own beyond argument handling.
"""
import collections
import ctypes
import functools
import json
import pickle
import sys

__all__ = [
    "CuprofError", "NotLoadedError", "annotate", "mark", "memory_allocated",
    "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
    "memory_summary", "reset_peak_memory_stats", "reset_accumulated_memory_stats", "empty_cache",
    "set_per_process_memory_fraction", "device_count",
]


class NotLoadedError(ImportError):
    """libcuprof.so is not loaded in this process: run it with `cuprof run -- python3 ...` or
    with libcuprof.so in LD_PRELOAD."""


class CuprofError(RuntimeError):
    """cuprof is loaded but could not answer (off mode, no CUDA device, bad device, ...)."""


# cuprof.h's results
_SUCCESS, _NOT_LOADED, _DISABLED, _INVALID, _IO, _NOMEM, _NOT_STARTED = 0, -1, -2, -3, -4, -5, -6
_WHY = {
    _NOT_LOADED: "libcuprof.so is not loaded",
    _DISABLED: "cuprof records nothing in this process (CUPROF_MODE=off, or no CUDA device)",
    _INVALID: "invalid argument",
    _IO: "the snapshot could not be written",
    _NOMEM: "out of host memory",
    _NOT_STARTED: "the program has made no CUDA call yet (cuprof never starts CUDA itself)",
}

# The C functions: name -> (restype, argtypes).
_SIGNATURES = {
    "cuprof_version": (ctypes.c_char_p, []),
    "cuprof_device_count": (ctypes.c_int, []),
    "cuprof_reset_peak_memory_stats": (ctypes.c_int, [ctypes.c_int]),
    "cuprof_reset_accumulated_memory_stats": (ctypes.c_int, [ctypes.c_int]),
    "cuprof_empty_cache": (ctypes.c_int, []),
    "cuprof_set_per_process_memory_fraction": (ctypes.c_int, [ctypes.c_double, ctypes.c_int]),
    "cuprof_memory_stats_json": (ctypes.c_void_p, [ctypes.c_int]),
    "cuprof_memory_summary": (ctypes.c_void_p, [ctypes.c_int]),
    "cuprof_memory_summary_abbreviated": (ctypes.c_void_p, [ctypes.c_int]),
    "cuprof_record_memory_history": (
        ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
    "cuprof_dump_snapshot": (ctypes.c_int, [ctypes.c_char_p]),
    "cuprof_annotate": (ctypes.c_int, [ctypes.c_char_p]),
    "cuprof_annotate_start": (ctypes.c_int, [ctypes.c_char_p]),
    "cuprof_annotate_end": (ctypes.c_int, [ctypes.c_char_p]),
    "cuprof_snapshot_pickle": (ctypes.c_void_p, [ctypes.POINTER(ctypes.c_size_t)]),
}


def _load():
    """The process's own symbols (the preloaded libcuprof.so is among them) and libc's free."""
    process = ctypes.CDLL(None)
    if not hasattr(process, "cuprof_version"):
        raise NotLoadedError(
            "cuprof: libcuprof.so is not loaded in this process: run it as "
            "`cuprof run -- python3 ...` (or with libcuprof.so in LD_PRELOAD)")
    lib = {}
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(process, name, None)
        if fn is None:
            raise NotLoadedError(f"cuprof: the libcuprof.so loaded here has no {name}: it is "
                                 "older than this module")
        fn.restype, fn.argtypes = restype, argtypes
        lib[name] = fn
    free = process.free
    free.restype, free.argtypes = None, [ctypes.c_void_p]
    return lib, free


_C, _free = _load()
__version__ = _C["cuprof_version"]().decode()


def _check(rc, what):
    if rc != _SUCCESS:
        raise CuprofError(f"cuprof: {what}: {_WHY.get(rc, f'error {rc}')}")


def _no_answer(what, device):
    """Why a call that returns text gave none."""
    n = _C["cuprof_device_count"]()
    if n < 0:
        return CuprofError(f"cuprof: {what}: {_WHY.get(n, f'error {n}')}")
    if device is not None and device >= n:
        return CuprofError(f"cuprof: {what}: no device {device} (cuprof serves {n})")
    return CuprofError(f"cuprof: {what}: {_WHY[_NOMEM]}")


def _taken(ptr, what, size=None, device=None):
    """The bytes of a malloc'd result, freed; CuprofError when the call returned NULL."""
    if not ptr:
        raise _no_answer(what, device)
    try:
        return ctypes.string_at(ptr, size) if size is not None else ctypes.string_at(ptr)
    finally:
        _free(ptr)


def _device_index(device):
    """PyTorch's optional device argument as cuprof.h's int (-1: the current device)."""
    if device is None:
        return -1
    if isinstance(device, str):
        kind, _, index = device.partition(":")
        if kind != "cuda" or (index and not index.isdigit()):
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return int(index) if index else -1
    if hasattr(device, "type") and hasattr(device, "index"):  # torch.device
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return -1 if device.index is None else int(device.index)
    if isinstance(device, bool) or not isinstance(device, int):
        raise ValueError(f"Expected a cuda device index, but got: {device!r}")
    return device if device >= 0 else -1


def device_count():
    """The number of devices cuprof serves (torch.cuda.device_count())."""
    n = _C["cuprof_device_count"]()
    _check(n if n < 0 else _SUCCESS, "device_count")
    return n


def memory_stats(device=None):
    """A dictionary of cuprof's allocator statistics for a device, PyTorch's flat keys
    ("allocated_bytes.all.current", ...) in PyTorch's order (sorted)."""
    index = _device_index(device)
    text = _taken(_C["cuprof_memory_stats_json"](index), "memory_stats", device=index)
    return collections.OrderedDict(sorted(json.loads(text.decode()).items()))


def memory_allocated(device=None):
    """The bytes the program's live allocations occupy on the device."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    """The peak of memory_allocated since the start or the last reset_peak_memory_stats."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    """The bytes cuprof's caching allocator holds on the device."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    """The peak of memory_reserved since the start or the last reset_peak_memory_stats."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def memory_summary(device=None, abbreviated=False):
    """PyTorch's memory_summary table for the device."""
    fn = _C["cuprof_memory_summary_abbreviated" if abbreviated else "cuprof_memory_summary"]
    index = _device_index(device)
    return _taken(fn(index), "memory_summary", device=index).decode()


def reset_peak_memory_stats(device=None):
    """Resets the "peak" statistics of the device to their current values."""
    _check(_C["cuprof_reset_peak_memory_stats"](_device_index(device)), "reset_peak_memory_stats")


def reset_accumulated_memory_stats(device=None):
    """Resets the "allocated", "freed" (and retry, OOM) counts of the device."""
    _check(_C["cuprof_reset_accumulated_memory_stats"](_device_index(device)),
           "reset_accumulated_memory_stats")


def empty_cache():
    """Releases every cached block cuprof holds that no allocation uses."""
    _check(_C["cuprof_empty_cache"](), "empty_cache")


def set_per_process_memory_fraction(fraction, device=None):
    """Caps cuprof's allocator on the device at fraction (0 < fraction <= 1) of its memory."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _check(_C["cuprof_set_per_process_memory_fraction"](fraction, _device_index(device)),
           f"set_per_process_memory_fraction({fraction})")


def _text(value, name, choices):
    if value is not None and value not in choices:
        raise ValueError(f"expected {name} to be one of {', '.join(map(repr, choices))} or "
                         f"None, not {value!r}")
    return None if value is None else value.encode()


def _record_memory_history(enabled="all", *args, **kwargs):
    """PyTorch's _record_memory_history: enabled "all" (history and state), "state" (state only)
    or None (stop and clear); context "all", "alloc", "state" or None (which stacks are kept);
    stacks "all" or "python"; max_entries the history's length. PyTorch's older form with a
    bool first (record_context, trace_alloc_max_entries, trace_alloc_record_context,
    record_context_cpp) is taken too. device, compile_context and global_record_annotations are
    accepted and have no effect (the history is every device's); clear_history=True empties it
    first."""
    if isinstance(enabled, bool):
        return _record_memory_history_legacy(enabled, *args, **kwargs)
    return _record_memory_history_impl(enabled, *args, **kwargs)


def _record_memory_history_impl(enabled="all", context="all", stacks="all",
                                 max_entries=sys.maxsize, device=None, clear_history=False,
                                 compile_context=False, global_record_annotations=False):
    del device, compile_context, global_record_annotations  # every device; no compile contexts
    e = _text(enabled, "enabled", ("state", "all"))
    c = _text(context, "context", ("state", "alloc", "all"))
    if stacks not in ("python", "all"):
        raise ValueError(f"expected stacks to be 'python', or 'all', not {stacks!r}")
    n = max(1, min(int(max_entries), 2 ** 63 - 1))  # PyTorch: at least one entry
    if clear_history and e is not None:
        _check(_C["cuprof_record_memory_history"](None, None, None, 0), "_record_memory_history")
    _check(_C["cuprof_record_memory_history"](e, c, stacks.encode(), n),
           "_record_memory_history")


def _record_memory_history_legacy(enabled, record_context=True, trace_alloc_max_entries=1,
                                  trace_alloc_record_context=False, device=None,
                                  record_context_cpp=False):
    context = "alloc" if trace_alloc_record_context else "state" if record_context else None
    _record_memory_history_impl("all" if enabled else None, context,
                                "all" if record_context_cpp else "python",
                                max(1, trace_alloc_max_entries), device)


def _snapshot(device=None):
    """The snapshot as PyTorch's _snapshot() returns it: a dict with "segments",
    "device_traces", "allocator_settings" (and "external_annotations" once a range was
    annotated), plus cuprof's own "cuprof" section."""
    del device  # PyTorch's snapshot holds every device too
    size = ctypes.c_size_t(0)
    ptr = _C["cuprof_snapshot_pickle"](ctypes.byref(size))
    return pickle.loads(_taken(ptr, "_snapshot", size.value))


def _dump_snapshot(filename="dump_snapshot.pickle"):
    """Writes the snapshot to filename (.pickle/.pkl, or .json), replacing it atomically."""
    _check(_C["cuprof_dump_snapshot"](str(filename).encode()), f"_dump_snapshot({filename})")


def mark(name):
    """Marks one point ("checkpoint saved") in every device's history."""
    _check(_C["cuprof_annotate"](str(name).encode()), f"mark({name!r})")


class annotate:
    """A named range of the program ("forward", "optimizer.step"): as a context manager
    (``with cuprof.annotate("forward"): ...``) or a decorator (``@cuprof.annotate("step")``).
    Its start and end are annotations in every device's history, as an NVTX range's are:
    ``cuprof summary`` shows the memory per range name."""

    def __init__(self, name):
        self.name = str(name)

    def __enter__(self):
        _check(_C["cuprof_annotate_start"](self.name.encode()), f"annotate({self.name!r})")
        return self

    def __exit__(self, *exc):
        _check(_C["cuprof_annotate_end"](self.name.encode()), f"annotate({self.name!r})")
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with annotate(self.name):
                return fn(*args, **kwargs)
        return wrapped
