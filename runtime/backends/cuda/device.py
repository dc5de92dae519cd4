"""The little the CUDA backend needs from CuPy, behind one object, so the same ops also run
on the kernel emulator (dev/cuda/emulator, numpy arrays) in tests without a GPU.

A `Device` owns one non-blocking stream (CUDA graphs cannot capture the legacy default
stream), compiles kernels/<name>.cu with NVRTC once per set of defines (CuPy caches the
binaries on disk), launches them, runs cuBLAS GEMMs and captures/replays CUDA graphs.
cuBLAS gets its own handle, bound to that stream with a fixed workspace once, at start,
and cublasGemmEx is called through ctypes: CuPy's wrappers refuse every cuBLAS call while a
stream is capturing, and a GEMM that may allocate its workspace cannot be captured either.
Kernel arguments are device arrays, None (a null pointer) or numpy scalars (np.int32,
np.float32), exactly what the kernel's C signature takes.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
from pathlib import Path

import numpy as np

KERNELS = Path(__file__).parent / "kernels"

# cuBLAS enums (cublas_api.h, library_types.h)
_OP_N, _OP_T = 0, 1
_CUDA_R_32F, _CUDA_R_16F = 0, 2
_COMPUTE_32F = 68
_GEMM_DEFAULT = -1
_DTYPE_CODE = {np.dtype(np.float32): _CUDA_R_32F, np.dtype(np.float16): _CUDA_R_16F}
CUBLAS_WORKSPACE = 32 << 20     # what cuBLAS asks for on Hopper


def _loaded_cublas():
    """The libcublas CuPy already loaded (RTLD_NOLOAD: never a second copy), or None."""
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            return ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        except OSError:
            continue
    return None


# Programmatic dependent launch through the driver (CuPy's RawKernel takes no launch attributes).
_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION = 6      # CUlaunchAttributeID


class _LaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


class _LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_LaunchAttribute)),
                ("num_attrs", ctypes.c_uint)]


def _launch_kernel_ex():
    """The driver's cuLaunchKernelEx, typed, or None (no driver, or one older than CUDA 12)."""
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def kernels_fingerprint() -> str:
    """A hash of every file under kernels/: CuPy keys a cached binary on the compiled file's
    own text, its options and the NVRTC version, not on the headers it includes."""
    h = hashlib.sha256()
    for path in sorted(KERNELS.iterdir()):
        if path.suffix in (".cu", ".cuh"):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def keep_kernels_in(root: str | Path) -> Path:
    """Point CuPy's on-disk kernel cache at root/<kernels_fingerprint>, so later starts load
    binaries instead of compiling (NVRTC: seconds per module). CuPy reads CUPY_CACHE_DIR at
    each compile: its one setting for this."""
    folder = Path(root) / kernels_fingerprint()
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["CUPY_CACHE_DIR"] = str(folder)
    return folder


class CaptureError(RuntimeError):
    """Something in a forward pass cannot be captured into a CUDA graph."""


class CublasError(RuntimeError):
    pass


def _gemm_ex(lib):
    """cublasGemmEx from the loaded library, typed (None where it is missing)."""
    fn = getattr(lib, "cublasGemmEx", None) if lib is not None else None
    if fn is not None:
        c = ctypes
        fn.argtypes = [c.c_void_p, c.c_int, c.c_int, c.c_int, c.c_int, c.c_int, c.c_void_p,
                       c.c_void_p, c.c_int, c.c_int, c.c_void_p, c.c_int, c.c_int, c.c_void_p,
                       c.c_void_p, c.c_int, c.c_int, c.c_int, c.c_int]
        fn.restype = c.c_int
    return fn


class Kernels:
    """Attribute access to the extern "C" kernels of one compiled .cu file."""

    def __init__(self, get):
        self._get, self._cache = get, {}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self._cache.get(name)
        if fn is None:
            fn = self._cache[name] = self._get(name)
        return fn


class CupyDevice:
    name = "cuda"

    def __init__(self, device_id: int = 0, pdl: bool = True):
        import cupy
        from cupy_backends.cuda.libs import cublas

        self.xp, self._cublas = cupy, cublas
        cupy.cuda.Device(device_id).use()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._modules: dict[tuple, Kernels] = {}
        self._alpha = np.ones(1, np.float32)    # host scalars for cuBLAS, kept alive
        self._beta = np.zeros(1, np.float32)
        props = cupy.cuda.runtime.getDeviceProperties(device_id)
        self.sm_count = props["multiProcessorCount"]
        self.max_smem = props["sharedMemPerBlockOptin"]
        self.smem_per_sm = props["sharedMemPerMultiprocessor"]
        self.smem_reserved = props.get("reservedSharedMemPerBlock", 1024)     # the driver's, per block
        self.device_name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        self.use()
        self._handle = cublas.create()
        cublas.setStream(self._handle, self.stream.ptr)
        cublas.setPointerMode(self._handle, 0)            # alpha, beta on the host
        self._workspace = cupy.empty(CUBLAS_WORKSPACE, np.uint8)
        lib = _loaded_cublas()                            # CuPy does not wrap cublasSetWorkspace
        self.cublas_workspace_set = lib is not None and hasattr(lib, "cublasSetWorkspace_v2") and \
            lib.cublasSetWorkspace_v2(ctypes.c_void_p(self._handle), ctypes.c_void_p(self._workspace.data.ptr),
                                      ctypes.c_size_t(CUBLAS_WORKSPACE)) == 0
        self._gemm_ex = _gemm_ex(lib)
        # Kernels captured into a decode graph may start while the previous one finishes
        # (common.cuh, pdl_wait): Hopper and later, unless pdl is off (CudaOptions.pdl).
        self.launch_ex = _launch_kernel_ex() if props["major"] >= 9 and pdl else None
        self.capturing = False

    @property
    def pdl(self) -> bool:
        """Whether captured kernels may overlap (programmatic dependent launch)."""
        return self.launch_ex is not None

    def use(self) -> None:
        """Make the backend's stream current for this thread (cupy array ops follow it)."""
        self.stream.use()

    # ---- kernels -------------------------------------------------------------------
    def kernels(self, file: str, **defines) -> Kernels:
        key = (file, tuple(sorted(defines.items())))
        if key not in self._modules:
            source = (KERNELS / f"{file}.cu").read_text()
            options = ("-std=c++17", f"-I{KERNELS}") + tuple(f"-D{k}={v}" for k, v in key[1])
            headers = Path(self.xp.cuda.get_cuda_path() or "/usr/local/cuda") / "include"
            if (headers / "cuda_fp16.h").exists():
                options += (f"-I{headers}",)
            module = self.xp.RawModule(code=source, options=options)
            self._modules[key] = Kernels(lambda name: _Launcher(module.get_function(name), self))
        return self._modules[key]

    # ---- memory --------------------------------------------------------------------
    def ptr(self, a) -> int:
        return int(a.data.ptr)

    def upload(self, host: np.ndarray):
        out = self.xp.empty(host.shape, host.dtype)
        out.set(np.ascontiguousarray(host), stream=self.stream)
        return out

    def copy_in(self, dst, host: np.ndarray) -> None:
        """Host -> the first host.size elements of device buffer dst, on the stream."""
        dst.ravel()[:host.size].set(host.ravel(), stream=self.stream)

    def to_host(self, a) -> np.ndarray:
        return a.get(stream=self.stream)

    def synchronize(self) -> None:
        self.stream.synchronize()

    def to_host_async(self, *arrays):
        """Start copies of contiguous device arrays into pinned host memory, in stream order;
        returns wait(), which blocks until they (not the work queued after them) are done
        and gives the host arrays."""
        import cupyx
        cupy = self.xp
        pairs = []
        for a in arrays:
            assert a.flags.c_contiguous, "to_host_async copies contiguous arrays"
            host = cupyx.empty_pinned(a.shape, a.dtype)
            cupy.cuda.runtime.memcpyAsync(host.ctypes.data, a.data.ptr, a.nbytes,
                                          cupy.cuda.runtime.memcpyDeviceToHost, self.stream.ptr)
            pairs.append((host, a))          # the device array stays alive until the copy is done
        done = cupy.cuda.Event(disable_timing=True)
        done.record(self.stream)

        def wait() -> list[np.ndarray]:
            done.synchronize()
            return [host for host, _ in pairs]
        return wait

    # ---- cuBLAS --------------------------------------------------------------------
    def gemm(self, x, w, y, out_col0: int = 0) -> None:
        """y[:, c0:c0 + N] (f32) = x[T, K] @ w[N, K]^T, x and w both f16 or both f32."""
        T, K = x.shape
        N, ldy = w.shape[0], y.shape[1]
        code = _DTYPE_CODE[np.dtype(x.dtype)]
        # column-major: y^T [N, T] = w [N, K] . x^T [K, T]  (w row-major = (w^T) column-major)
        args = (self._handle, _OP_T, _OP_N, N, T, K, self._alpha.ctypes.data, w.data.ptr, code, K,
                x.data.ptr, code, K, self._beta.ctypes.data, y.data.ptr + 4 * out_col0, _CUDA_R_32F, ldy,
                _COMPUTE_32F, _GEMM_DEFAULT)
        if self._gemm_ex is None:                          # CuPy's wrapper: fine outside a capture
            self._cublas.gemmEx(*args)
        elif (status := self._gemm_ex(*args)) != 0:
            raise CublasError(f"cublasGemmEx failed with status {status} (T={T}, N={N}, K={K})")

    # ---- graphs --------------------------------------------------------------------
    def capture(self, fn):
        """Run fn() under stream capture; returns (fn's result, a replayable graph). A
        failure inside ends the capture and is raised as CaptureError."""
        cupy = self.xp
        self.stream.begin_capture()
        self.capturing = True
        try:
            result = fn()
        except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError,
                self._cublas.CUBLASError, CublasError, NotImplementedError) as e:   # CuPy refuses cuBLAS in a capture
            try:
                self.stream.end_capture()
            except cupy.cuda.runtime.CUDARuntimeError as again:   # the capture was invalidated
                e.add_note(f"ending the capture: {again}")
            raise CaptureError(str(e)) from e
        finally:
            self.capturing = False
        graph = self.stream.end_capture()
        if hasattr(graph, "upload"):
            graph.upload(self.stream)
        return result, _CupyGraph(graph, self.stream)


class _Launcher:
    def __init__(self, fn, dev: CupyDevice):
        # Without the attribute a block gets 48 KiB of dynamic plus static shared memory in all,
        # so a launch asking for exactly 48 KiB dynamic next to a kernel's static arrays fails
        # (the lm_head of a 1536-wide model at 5-8 tokens did); any dynamic size raises the attribute.
        self.fn, self.dev, self.smem_limit, self.shared_preferred = fn, dev, 0, False

    def prefer_shared(self) -> None:
        """Ask for the SM's largest shared-memory carveout (L1 gets the rest): a kernel that
        stages weights there (linear.py stage_plan) must fit beside the previous kernel's block."""
        if not self.shared_preferred:
            self.fn.preferred_shared_memory_carveout = 100
            self.shared_preferred = True

    def __call__(self, grid, block, args, smem: int = 0):
        if smem > self.smem_limit:
            self.fn.max_dynamic_shared_size_bytes = smem
            self.smem_limit = smem
        args = tuple(np.uint64(0) if a is None else a for a in args)
        if self.dev.capturing and self.dev.launch_ex is not None:
            self._launch_pdl(grid, block, args, smem)
        else:
            self.fn(tuple(grid), tuple(block), args, shared_mem=smem)   # on the current stream

    def _launch_pdl(self, grid, block, args, smem: int) -> None:
        """cuLaunchKernelEx with programmatic stream serialization on the device's stream."""
        values = [ctypes.create_string_buffer(_arg_bytes(a)) for a in args]
        params = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.cast(v, ctypes.c_void_p) for v in values])
        attr = _LaunchAttribute(id=_ATTR_PROGRAMMATIC_STREAM_SERIALIZATION)
        attr.value[0] = 1
        dims = lambda d: (ctypes.c_uint * 3)(*(tuple(d) + (1, 1, 1))[:3])
        config = _LaunchConfig(dims(grid), dims(block), smem, self.dev.stream.ptr, ctypes.pointer(attr), 1)
        status = self.dev.launch_ex(ctypes.byref(config), self.fn.kernel.ptr, params, None)
        if status != 0:
            raise self.dev.xp.cuda.driver.CUDADriverError(status)


def _arg_bytes(a) -> bytes:
    """A kernel argument as the bytes its C parameter holds: a device array's address or a
    numpy scalar's value."""
    if isinstance(a, np.generic):
        return a.tobytes()
    if hasattr(a, "data") and hasattr(a.data, "ptr"):
        return np.uint64(a.data.ptr).tobytes()
    raise TypeError(f"kernel argument of type {type(a).__name__}: pass a device array, None or a numpy scalar")


class _CupyGraph:
    def __init__(self, graph, stream):
        self.graph, self.stream = graph, stream

    def replay(self) -> None:
        self.graph.launch(self.stream)
