"""GPU specs with sources, ridge points, and a live measurement of this machine's own ceilings.

``python -m lab hardware`` prints the table of datasheet figures and each device's ridge point
(peak FLOP/s divided by memory bandwidth: the arithmetic intensity above which a kernel can be
compute-bound). ``--measure`` times a large matmul and a large copy on this machine (the GPU when
there is one, otherwise the CPU) and writes a dataset with provenance (default data/local/hardware).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from lab import REPO_ROOT, LabError

KIB, MIB, GB, TB, TFLOPS = 1024, 1024**2, 10**9, 10**12, 10**12


@dataclass(frozen=True)
class Source:
    title: str
    url: str

    def __str__(self) -> str:
        return f"{self.title} ({self.url})"


# --- where every figure comes from -----------------------------------------------------------------
A100_DATASHEET = Source("NVIDIA A100 Tensor Core GPU datasheet",
                        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
AMPERE_WHITEPAPER = Source("NVIDIA A100 Tensor Core GPU Architecture (whitepaper)",
                           "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf")
GA102_WHITEPAPER = Source("NVIDIA Ampere GA102 GPU Architecture (whitepaper)",
                          "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf")
A10_DATASHEET = Source("NVIDIA A10 Tensor Core GPU datasheet",
                       "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf")
A10G_BASETEN = Source("Baseten, 'NVIDIA A10 vs A10G for ML model inference' (spec table from NVIDIA/AWS figures)",
                      "https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/")
AWS_G5 = Source("Amazon EC2 G5 instances (A10G, 24 GB per GPU)", "https://aws.amazon.com/ec2/instance-types/g5/")
H100_DATASHEET = Source("NVIDIA H100 Tensor Core GPU datasheet",
                        "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet")
HOPPER_WHITEPAPER = Source("NVIDIA H100 Tensor Core GPU Architecture (whitepaper)",
                           "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper")
H200_DATASHEET = Source("NVIDIA H200 Tensor Core GPU datasheet", "https://www.nvidia.com/en-us/data-center/h200/")
L4_DATASHEET = Source("NVIDIA L4 Tensor Core GPU datasheet",
                      "https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet")
ADA_WHITEPAPER = Source("NVIDIA Ada GPU Architecture (whitepaper)",
                        "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf")
CUDA_GUIDE = Source("CUDA C++ Programming Guide, technical specifications per compute capability",
                    "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#features-and-technical-specifications")

#: The NVIDIA A10's dense bf16/fp16 tensor figure (A10_DATASHEET), quoted beside the A10G's because sources disagree.
A10_BF16_FLOPS = 125 * TFLOPS

#: Figures every device must carry, each with a source.
SPEC_FIELDS = ("bf16_flops", "fp32_flops", "bandwidth", "smem_per_sm", "l1_smem_per_sm",
               "sm_count", "l2_bytes", "memory_bytes")


@dataclass(frozen=True)
class Device:
    """Datasheet figures for one GPU. FLOP/s are dense (no 2:4 sparsity); bytes are decimal GB for memory."""

    key: str
    name: str
    arch: str
    bf16_flops: float      # peak dense bf16/fp16 tensor-core FLOP/s, fp32 accumulate
    fp32_flops: float      # peak fp32 FLOP/s on the CUDA cores (no tensor cores)
    bandwidth: float       # device memory bandwidth, bytes/s
    smem_per_sm: int       # largest shared memory one SM can give to its thread blocks, bytes
    l1_smem_per_sm: int    # combined L1 + shared memory per SM, bytes
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    sources: dict = field(default_factory=dict)  # spec field -> Source
    note: str = ""

    def peak_flops(self, dtype: str = "bf16") -> float:
        if dtype in ("bf16", "fp16"):
            return self.bf16_flops
        if dtype == "fp32":
            return self.fp32_flops
        raise LabError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPE_BYTES)}")

    def ridge(self, dtype: str = "bf16") -> float:
        """FLOP per byte at which the compute roof meets the memory roof."""
        return self.peak_flops(dtype) / self.bandwidth


#: bytes per element of each dtype the book uses.
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


def _same(source: Source, *fields: str) -> dict:
    return {f: source for f in fields}


DEVICES: dict[str, Device] = {d.key: d for d in [
    Device(
        key="A10G", name="NVIDIA A10G (AWS G5)", arch="Ampere GA102, sm_86",
        bf16_flops=70 * TFLOPS, fp32_flops=35 * TFLOPS, bandwidth=600 * GB,
        smem_per_sm=100 * KIB, l1_smem_per_sm=128 * KIB, sm_count=80, l2_bytes=6 * MIB, memory_bytes=24 * GB,
        sources={**_same(A10G_BASETEN, "bf16_flops", "fp32_flops", "bandwidth", "sm_count"),
                 **_same(CUDA_GUIDE, "smem_per_sm"), **_same(GA102_WHITEPAPER, "l1_smem_per_sm", "l2_bytes"),
                 "memory_bytes": AWS_G5},
        note=("Sources disagree on tensor throughput. The A10G is an AWS-only part with no NVIDIA datasheet of its "
              "own; the figures quoted for it (70 TFLOP/s dense bf16/fp16, 35 TFLOP/s fp32, 80 SMs) differ from the "
              "NVIDIA A10 datasheet (125 TFLOP/s dense bf16/fp16, 31.2 TFLOP/s fp32, 72 SMs; "
              + str(A10_DATASHEET) + "). Both have 24 GB GDDR6 at 600 GB/s. With 125 the ridge would be 208 FLOP/B."),
    ),
    Device(
        key="A100-80GB-SXM", name="NVIDIA A100 80GB SXM", arch="Ampere GA100, sm_80",
        bf16_flops=312 * TFLOPS, fp32_flops=19.5 * TFLOPS, bandwidth=2039 * GB,
        smem_per_sm=164 * KIB, l1_smem_per_sm=192 * KIB, sm_count=108, l2_bytes=40 * MIB, memory_bytes=80 * GB,
        sources={**_same(A100_DATASHEET, "bf16_flops", "fp32_flops", "bandwidth", "memory_bytes"),
                 **_same(AMPERE_WHITEPAPER, "smem_per_sm", "l1_smem_per_sm", "sm_count", "l2_bytes")},
    ),
    Device(
        key="H100-SXM", name="NVIDIA H100 SXM", arch="Hopper GH100, sm_90",
        bf16_flops=989.4 * TFLOPS, fp32_flops=67 * TFLOPS, bandwidth=3350 * GB,
        smem_per_sm=228 * KIB, l1_smem_per_sm=256 * KIB, sm_count=132, l2_bytes=50 * MIB, memory_bytes=80 * GB,
        sources={**_same(HOPPER_WHITEPAPER, "bf16_flops", "smem_per_sm", "l1_smem_per_sm", "sm_count", "l2_bytes"),
                 **_same(H100_DATASHEET, "fp32_flops", "bandwidth", "memory_bytes")},
        note="The datasheet's 1,979 TFLOP/s bf16 is with 2:4 sparsity; the whitepaper gives 989.4 dense.",
    ),
    Device(
        key="H200-SXM", name="NVIDIA H200 SXM", arch="Hopper GH100, sm_90",
        bf16_flops=989.4 * TFLOPS, fp32_flops=67 * TFLOPS, bandwidth=4800 * GB,
        smem_per_sm=228 * KIB, l1_smem_per_sm=256 * KIB, sm_count=132, l2_bytes=50 * MIB, memory_bytes=141 * GB,
        sources={**_same(H200_DATASHEET, "bf16_flops", "fp32_flops", "bandwidth", "memory_bytes"),
                 **_same(HOPPER_WHITEPAPER, "smem_per_sm", "l1_smem_per_sm", "sm_count", "l2_bytes")},
        note=("Same GH100 compute as the H100 SXM (datasheet: 1,979 TFLOP/s bf16 with sparsity, so 989.4 dense); "
              "new HBM3e memory. SM, L2 and shared-memory figures are GH100's from the Hopper whitepaper."),
    ),
    Device(
        key="L4", name="NVIDIA L4", arch="Ada AD104, sm_89",
        bf16_flops=121 * TFLOPS, fp32_flops=30.3 * TFLOPS, bandwidth=300 * GB,
        smem_per_sm=100 * KIB, l1_smem_per_sm=128 * KIB, sm_count=58, l2_bytes=48 * MIB, memory_bytes=24 * GB,
        sources={**_same(L4_DATASHEET, "bf16_flops", "fp32_flops", "bandwidth", "memory_bytes"),
                 **_same(CUDA_GUIDE, "smem_per_sm"), **_same(ADA_WHITEPAPER, "l1_smem_per_sm", "sm_count", "l2_bytes")},
        note="The datasheet's 242 TFLOP/s bf16 is with sparsity; dense is half.",
    ),
    Device(
        key="RTX-4090", name="NVIDIA GeForce RTX 4090", arch="Ada AD102, sm_89",
        bf16_flops=165.2 * TFLOPS, fp32_flops=82.6 * TFLOPS, bandwidth=1008 * GB,
        smem_per_sm=100 * KIB, l1_smem_per_sm=128 * KIB, sm_count=128, l2_bytes=72 * MIB, memory_bytes=24 * GB,
        sources={**_same(ADA_WHITEPAPER, "bf16_flops", "fp32_flops", "bandwidth", "l1_smem_per_sm", "sm_count",
                         "l2_bytes", "memory_bytes"), **_same(CUDA_GUIDE, "smem_per_sm")},
        note=("165.2 is bf16 or fp16 with fp32 accumulate (what frameworks use); the whitepaper lists 330.3 for fp16 "
              "with fp16 accumulate, a mode GeForce parts run at twice the rate."),
    ),
]}


def device(key: str) -> Device:
    """Look up a device by key (case-insensitive), e.g. 'H100-SXM'."""
    for k, dev in DEVICES.items():
        if k.lower() == key.lower():
            return dev
    raise LabError(f"unknown device {key!r}; known: {', '.join(DEVICES)}")


def match_device(name: str | None) -> Device | None:
    """The table entry for a CUDA device name such as 'NVIDIA H200' or 'NVIDIA A10G' (None if not in the table)."""
    if not name:
        return None
    text = name.upper().replace(" ", "")
    for probe, key in (("H200", "H200-SXM"), ("H100", "H100-SXM"), ("A100", "A100-80GB-SXM"),
                       ("A10G", "A10G"), ("L4", "L4"), ("4090", "RTX-4090")):
        if probe in text and not (probe == "L4" and "L40" in text):
            return DEVICES[key]
    return None


def spec_table():
    """The device table as a DataFrame (one row per device, SI units), with the ridge point."""
    import pandas as pd

    rows = []
    for dev in DEVICES.values():
        rows.append({
            "device": dev.key, "name": dev.name, "arch": dev.arch,
            "bf16_tflops": dev.bf16_flops / TFLOPS, "fp32_tflops": dev.fp32_flops / TFLOPS,
            "bandwidth_tb_s": dev.bandwidth / TB, "ridge_flop_per_byte": dev.ridge("bf16"),
            "smem_per_sm_kib": dev.smem_per_sm / KIB, "l1_smem_per_sm_kib": dev.l1_smem_per_sm / KIB,
            "sm_count": dev.sm_count, "l2_mib": dev.l2_bytes / MIB, "memory_gb": dev.memory_bytes / GB,
        })
    return pd.DataFrame(rows)


# --- live measurement ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ceilings:
    """What this machine achieved: the roofs a reader's kernels actually live under."""

    name: str            # device name, e.g. "NVIDIA H200" or "CPU (x86_64)"
    dtype: str           # dtype of the matmul
    peak_flops: float    # best median matmul FLOP/s over the sizes tried
    bandwidth: float     # best median copy bandwidth, bytes/s (read + write counted)
    rows: tuple = ()     # every timing: dicts with kind, size, dtype, median_s, reps, value, unit

    def ridge(self, dtype: str | None = None) -> float:
        return self.peak_flops / self.bandwidth


def _median_seconds(fn, reps: int, warmup: int, min_sample_s: float = 0.02) -> float:
    """Median wall time of one fn() call on the CPU, over ``reps`` samples after ``warmup`` calls.

    Each sample times a batch of calls lasting at least ``min_sample_s``, so a coarse clock (some
    virtual machines tick every few milliseconds) does not swamp a short call.
    """
    for _ in range(warmup):
        fn()
    batch = 1
    while batch < 1 << 16:
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        if time.perf_counter() - start >= min_sample_s:
            break
        batch *= 2
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - start) / batch)
    return statistics.median(times)


def _median_seconds_cuda(torch, fn, reps: int, warmup: int) -> float:
    """Median GPU time of fn() in seconds, each call timed between its own pair of CUDA events.

    Warm-up runs at least ``warmup`` calls and at least 0.2 s, so clocks have ramped up before timing.
    """
    start_wall, calls = time.perf_counter(), 0
    while calls < warmup or time.perf_counter() - start_wall < 0.2:
        fn()
        calls += 1
        if calls % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs) / 1e3


def _matmul_op(torch, n: int, dev: str, tdtype, gen):
    """A call that multiplies two random n×n matrices into a preallocated output."""
    if torch is None:
        import numpy as np
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        out = np.empty((n, n), dtype=np.float32)
        return lambda: np.matmul(a, b, out=out)
    a = torch.randn(n, n, device=dev, dtype=tdtype, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=tdtype, generator=gen)
    out = torch.empty(n, n, device=dev, dtype=tdtype)
    return lambda: torch.matmul(a, b, out=out)


def _copy_op(torch, elements: int, dev: str, gen):
    """A call that copies a random fp32 buffer into another one."""
    if torch is None:
        import numpy as np
        src = np.random.default_rng(1).random(elements, dtype=np.float32)
        dst = np.empty_like(src)
        return lambda: np.copyto(dst, src)
    src = torch.rand(elements, device=dev, dtype=torch.float32, generator=gen)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


#: (matmul sizes n for an n×n×n product, copy sizes in bytes) per target.
GPU_SIZES = ((4096, 8192, 12288), (256 * MIB, 1024 * MIB, 2048 * MIB))
CPU_SIZES = ((256, 512, 1024), (64 * MIB, 256 * MIB))  # copies larger than a CPU's last-level cache
QUICK_CPU_SIZES = ((128, 256), (64 * MIB,))


def measure(use_gpu: bool | None = None, matmul_sizes=None, copy_sizes=None, reps: int | None = None,
            progress: bool = False) -> Ceilings:
    """Measure achieved matmul FLOP/s and copy bandwidth on the GPU (bf16) or, without one, the CPU (fp32).

    Random inputs, warm-up calls first, median over ``reps`` timed calls; the best size wins
    (small problems do not fill the machine). A copy moves each byte twice: read once, written once.
    """
    try:
        import torch
    except ImportError:
        torch = None
    if use_gpu is None:
        use_gpu = torch is not None and torch.cuda.is_available()
    if use_gpu and (torch is None or not torch.cuda.is_available()):
        raise LabError("no CUDA GPU visible to torch; call measure(use_gpu=False) to measure the CPU")
    default_mm, default_copy = GPU_SIZES if use_gpu else CPU_SIZES
    matmul_sizes = tuple(matmul_sizes or default_mm)
    copy_sizes = tuple(copy_sizes or default_copy)
    reps = reps or (20 if use_gpu else 5)
    try:
        from tqdm.auto import tqdm
    except ImportError:  # progress bars are a nicety
        tqdm = None
    jobs = [("matmul", n) for n in matmul_sizes] + [("copy", b) for b in copy_sizes]
    bar = tqdm(jobs, desc="measuring ceilings", disable=not progress or tqdm is None, leave=False) if tqdm else jobs

    rows = []
    if use_gpu:
        name, dtype, dev = torch.cuda.get_device_name(0), "bf16", "cuda"
        tdtype = torch.bfloat16
    else:
        import platform
        name, dtype, dev = f"CPU ({platform.machine()})", "fp32", "cpu"
        tdtype = torch.float32 if torch is not None else None
    gen = torch.Generator(device=dev).manual_seed(0) if torch is not None else None
    for kind, size in bar:
        if kind == "matmul":
            op = _matmul_op(torch, size, dev, tdtype, gen)
            work, unit, row_dtype, row_size = 2.0 * size**3, "FLOP/s", dtype, size
        else:
            elements = size // 4  # fp32 words: the element type does not change a copy's bytes
            op = _copy_op(torch, elements, dev, gen)
            work, unit, row_dtype, row_size = 2.0 * elements * 4, "B/s", "fp32", elements * 4  # read + write
        seconds = _median_seconds_cuda(torch, op, reps, 3) if use_gpu else _median_seconds(op, reps, 1)
        rows.append(dict(kind=kind, size=row_size, dtype=row_dtype, median_s=seconds, reps=reps,
                         value=work / seconds, unit=unit))
        del op
    if use_gpu:
        torch.cuda.empty_cache()
    best_flops = max(r["value"] for r in rows if r["kind"] == "matmul")
    best_bw = max(r["value"] for r in rows if r["kind"] == "copy")
    for value in (best_flops, best_bw):
        if not (math.isfinite(value) and value > 0):
            raise LabError(f"measurement gave a non-positive or non-finite figure ({value}); the timer may be too coarse")
    return Ceilings(name=name, dtype=dtype, peak_flops=best_flops, bandwidth=best_bw, rows=tuple(rows))


def quick_cpu_ceilings() -> Ceilings:
    """A few-second CPU measurement for a chapter build on any laptop."""
    return measure(use_gpu=False, matmul_sizes=QUICK_CPU_SIZES[0] + (512,), copy_sizes=(128 * MIB,), reps=3)


def write_measurement(ceilings: Ceilings, out: Path, command: str | None = None) -> Path:
    """Write measurements.json, measurements.csv and provenance.json to ``out``."""
    from lab import data

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_rows_csv(out / "measurements.csv", list(ceilings.rows))
    matched = match_device(ceilings.name)
    summary = {
        "device": ceilings.name, "dtype": ceilings.dtype,
        "peak_flops": ceilings.peak_flops, "bandwidth": ceilings.bandwidth, "ridge": ceilings.ridge(),
        "datasheet": matched.key if matched else None,
        "fraction_of_datasheet_flops": ceilings.peak_flops / matched.peak_flops(ceilings.dtype) if matched else None,
        "fraction_of_datasheet_bandwidth": ceilings.bandwidth / matched.bandwidth if matched else None,
        "rows": list(ceilings.rows),
    }
    data.write_json_atomic(out / "measurements.json", summary)
    record = data.new_provenance("hardware", dtype=ceilings.dtype, command=command,
                                 flags={"method": "median of CUDA-event (GPU) or perf_counter (CPU) timings, "
                                                  "random inputs, warm-up first; copy counts read + write"})
    data.write_provenance(out, record)
    return out


def _write_rows_csv(path: Path, rows: list[dict]) -> None:
    """CSV without pandas (a bare GPU box may lack it), through a temporary file."""
    import csv
    import os

    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def load_measurement(folder: str | Path) -> Ceilings | None:
    """Ceilings from a measurement dataset folder (e.g. data/h200/hardware), or None when it is not there."""
    from lab import data

    path = Path(folder)
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not (path / "measurements.json").exists():
        return None
    ds = data.load(path)
    summary = ds.json("measurements.json")
    try:
        return Ceilings(name=summary["device"], dtype=summary["dtype"], peak_flops=float(summary["peak_flops"]),
                        bandwidth=float(summary["bandwidth"]), rows=tuple(summary.get("rows", ())))
    except (KeyError, TypeError, ValueError) as exc:
        raise LabError(f"{path / 'measurements.json'}: missing or malformed field ({exc})") from None


# --- CLI -------------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--measure", action="store_true",
                        help="time a matmul and a copy on this machine (GPU if present, else CPU) and write a dataset")
    parser.add_argument("--out", default=None,
                        help="dataset folder for --measure (default data/local/hardware)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a few seconds on a laptop CPU")
    parser.add_argument("--sources", action="store_true", help="also list the source of every figure")


def print_table() -> None:
    table = spec_table()
    print(f"{'device':14s} {'bf16 TF/s':>9s} {'fp32 TF/s':>9s} {'TB/s':>6s} {'ridge':>6s} "
          f"{'smem/SM':>8s} {'SMs':>4s} {'L2 MiB':>6s} {'mem GB':>6s}")
    for r in table.itertuples():
        print(f"{r.device:14s} {r.bf16_tflops:9.1f} {r.fp32_tflops:9.1f} {r.bandwidth_tb_s:6.3f} "
              f"{r.ridge_flop_per_byte:6.0f} {r.smem_per_sm_kib:6.0f}Ki {r.sm_count:4d} {r.l2_mib:6.0f} {r.memory_gb:6.0f}")
    print("ridge = dense bf16 FLOP/s / memory bandwidth (FLOP per byte). --sources lists where each figure comes from.")


def main(args) -> int:
    print_table()
    if args.sources:
        for dev in DEVICES.values():
            print(f"\n{dev.key}:")
            for fld in SPEC_FIELDS:
                print(f"  {fld:15s} {dev.sources[fld]}")
            if dev.note:
                print(f"  note: {dev.note}")
    if not args.measure:
        return 0
    from lab import data

    out = Path(args.out) if args.out else data.LOCAL_DIR / "hardware"
    if args.quick:
        ceilings = measure(use_gpu=False, matmul_sizes=QUICK_CPU_SIZES[0], copy_sizes=QUICK_CPU_SIZES[1], progress=True) \
            if not _has_gpu() else measure(matmul_sizes=(1024, 2048), copy_sizes=(64 * MIB,), progress=True)
    else:
        ceilings = measure(progress=True)
    write_measurement(ceilings, out)
    print(f"\nmeasured on {ceilings.name} ({ceilings.dtype} matmul): "
          f"{ceilings.peak_flops / TFLOPS:.3g} TFLOP/s, copy {ceilings.bandwidth / TB:.3g} TB/s, "
          f"ridge {ceilings.ridge():.1f} FLOP/byte")
    matched = match_device(ceilings.name)
    if matched:
        print(f"that is {ceilings.peak_flops / matched.peak_flops(ceilings.dtype):.0%} of the datasheet's FLOP/s "
              f"and {ceilings.bandwidth / matched.bandwidth:.0%} of its bandwidth ({matched.key})")
    print(f"wrote {out}/measurements.json, measurements.csv, provenance.json")
    return 0


def _has_gpu() -> bool:
    from lab import env
    return env.detect().has_gpu
