"""GPU specs with sources, ridge points, and a live measurement of this machine's own ceilings.

``python -m lab hardware`` prints the table of datasheet figures and each device's ridge point
(peak FLOP/s divided by memory bandwidth: the arithmetic intensity above which a kernel can be
compute-bound). ``--measure`` times a large matmul and a large copy on this machine (the GPU when
there is one, otherwise the CPU) and writes a dataset with provenance (default data/local/hardware).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab import REPO_ROOT, LabError, env
from lab.cli import path_arg
from lab.folders import dataset_lock
from lab.measure import ceilings as measured_ceilings
from lab.measure.ceilings import (  # noqa: F401  (the measured side of this module's face)
    CPU_SIZES,
    GPU_SIZES,
    QUICK_CPU_SIZES,
    Ceilings,
    quick_cpu_ceilings,
    write_measurement,
)
from lab.results import data, units


def measure(*args, **kwargs) -> Ceilings:
    """:func:`lab.measure.ceilings.measure`, and on a GPU a note of what it measured for
    ``lab.book.live_check`` (``lab.env.note_live``: nothing happens unless a check is running)."""

    result = measured_ceilings.measure(*args, **kwargs)
    if not result.name.startswith("CPU"):
        env.note_live(f"{result.name}: matmul {units.flops_rate(result.peak_flops)}, copy {units.byte_rate(result.bandwidth)}")
    return result


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
#: NVIDIA publishes no L2 size for the H200; the driver of the lent one reports 60 MiB (the H100 SXM's is 50 MB).
H200_MEASURED = Source("cudaDeviceProp of the lent H200, read by `python -m lab device-properties`",
                       "data/h200/device-properties/properties.json")
CUDA_GUIDE = Source("CUDA C++ Programming Guide, technical specifications per compute capability",
                    "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#features-and-technical-specifications")

#: The NVIDIA A10's dense bf16/fp16 tensor figure (A10_DATASHEET), quoted beside the A10G's because sources disagree.
A10_BF16_FLOPS = 125 * TFLOPS

#: Figures every device must carry, each with a source.
SPEC_FIELDS = ("bf16_flops", "fp32_flops", "bandwidth", "smem_per_sm", "l1_smem_per_sm",
               "sm_count", "l2_bytes", "memory_bytes", "registers_per_sm")

#: 64K 32-bit registers per SM on every compute capability from 7.0 to 9.0 (CUDA_GUIDE, technical specifications).
REGISTERS_PER_SM = 64 * 1024 * 4
#: Shared memory has 32 banks, each delivering one 32-bit word per clock to a warp (CUDA_GUIDE, shared memory).
SHARED_BYTES_PER_CLOCK_PER_SM = 32 * 4


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
    registers_per_sm: int = REGISTERS_PER_SM
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
        smem_per_sm=228 * KIB, l1_smem_per_sm=256 * KIB, sm_count=132, l2_bytes=60 * MIB, memory_bytes=141 * GB,
        sources={**_same(H200_DATASHEET, "bf16_flops", "fp32_flops", "bandwidth", "memory_bytes"),
                 **_same(HOPPER_WHITEPAPER, "smem_per_sm", "l1_smem_per_sm", "sm_count"),
                 **_same(H200_MEASURED, "l2_bytes")},
        note=("Same GH100 compute as the H100 SXM (datasheet: 1,979 TFLOP/s bf16 with sparsity, so 989.4 dense); "
              "new HBM3e memory. SM and shared-memory figures are GH100's from the Hopper whitepaper; the L2 size "
              "is what the lent H200's driver reports (60 MiB, the whole GH100 die's; the H100 SXM enables 50 MB)."),
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


for _dev in DEVICES.values():  # every device in the table has 64K registers per SM (CUDA_GUIDE)
    _dev.sources.setdefault("registers_per_sm", CUDA_GUIDE)


def memory_hierarchy(dev: Device) -> list[dict]:
    """The levels a kernel's data passes through, fastest and smallest first, each with its source.

    Per level: ``size_per_unit`` (bytes per SM, or for the whole chip), ``units`` (SMs, or 1),
    ``size`` (total bytes), ``bandwidth`` (bytes/s where a figure is published, else None),
    ``per_clock_per_sm`` (bytes per clock per SM where that is how it is specified), ``source``.
    Register and L2 bandwidths are not published by NVIDIA; they are left as None, not guessed.
    """
    return [
        {"level": "registers", "size_per_unit": dev.registers_per_sm, "units": dev.sm_count,
         "size": dev.registers_per_sm * dev.sm_count, "bandwidth": None, "per_clock_per_sm": None,
         "source": dev.sources["registers_per_sm"]},
        {"level": "shared memory", "size_per_unit": dev.smem_per_sm, "units": dev.sm_count,
         "size": dev.smem_per_sm * dev.sm_count, "bandwidth": None,
         "per_clock_per_sm": SHARED_BYTES_PER_CLOCK_PER_SM, "source": dev.sources["smem_per_sm"]},
        {"level": "L2 cache", "size_per_unit": dev.l2_bytes, "units": 1, "size": dev.l2_bytes, "bandwidth": None,
         "per_clock_per_sm": None, "source": dev.sources["l2_bytes"]},
        {"level": "HBM" if dev.key != "A10G" else "GDDR6", "size_per_unit": dev.memory_bytes, "units": 1,
         "size": dev.memory_bytes, "bandwidth": dev.bandwidth, "per_clock_per_sm": None,
         "source": dev.sources["bandwidth"]},
    ]


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


def load_measurement(folder: str | Path) -> Ceilings | None:
    """Ceilings from a measurement dataset folder (e.g. data/h200/hardware), or None when it is not there."""

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


def datasheet_fields(ceilings: Ceilings) -> dict:
    """The datasheet a measurement matched, and what fraction of its FLOP/s and bandwidth was reached."""
    matched = match_device(ceilings.name)
    return {
        "datasheet": matched.key if matched else None,
        "fraction_of_datasheet_flops": ceilings.peak_flops / matched.peak_flops(ceilings.dtype) if matched else None,
        "fraction_of_datasheet_bandwidth": ceilings.bandwidth / matched.bandwidth if matched else None,
    }


# --- CLI -------------------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("--measure", action="store_true",
                        help="time a matmul and a copy on this machine (GPU if present, else CPU) and write a dataset")
    parser.add_argument("--out", default=None, type=path_arg,
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

    out = Path(args.out) if args.out else data.LOCAL_DIR / "hardware"
    with dataset_lock(out, kinds=("hardware",)):        # taken first: a folder that cannot be written is refused before minutes of timing
        if args.quick:
            ceilings = measure(use_gpu=False, matmul_sizes=QUICK_CPU_SIZES[0], copy_sizes=QUICK_CPU_SIZES[1],
                               progress=True) \
                if not _has_gpu() else measure(matmul_sizes=(1024, 2048), copy_sizes=(64 * MIB,), progress=True)
        else:
            ceilings = measure(progress=True)
        write_measurement(ceilings, out, datasheet=datasheet_fields(ceilings))
    print(f"\nmeasured on {ceilings.name} ({ceilings.dtype} matmul): "
          f"{units.flops_rate(ceilings.peak_flops)}, copy {units.byte_rate(ceilings.bandwidth)}, "
          f"ridge {ceilings.ridge():.1f} FLOP/byte")
    matched = match_device(ceilings.name)
    if matched:
        print(f"that is {ceilings.peak_flops / matched.peak_flops(ceilings.dtype):.0%} of the datasheet's FLOP/s "
              f"and {ceilings.bandwidth / matched.bandwidth:.0%} of its bandwidth ({matched.key})")
    print(f"wrote {out}/measurements.json, measurements.csv, provenance.json")
    return 0


def _has_gpu() -> bool:
    return env.detect().has_gpu
