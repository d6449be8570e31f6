"""The scripts the post-deploy validation Jobs run (components/platform/validation/validation.py
builds the Jobs): the GPU smoke test, the NCCL all-reduce test and the small Prometheus endpoint
both serve their result from. Plain strings, compiled by the tests
(tests/platform/test_validation.py)."""

from __future__ import annotations

from typing import Final

#: Where a finished test pod serves its result as Prometheus text (the PodMonitor's `metrics`
#: port); 9402 beside the trainers' 9401 so the two never get confused in a scrape config.
METRICS_PORT: Final = 9402
METRICS_PORT_NAME: Final = "metrics"
#: Metric names the tests serve (components/platform/observability/alerts.py EXPORTER_METRICS
#: "validation").
METRIC_PASSED: Final = "gpu_platform_validation_passed"
METRIC_CHECK: Final = "gpu_platform_validation_check"
METRIC_BUSBW: Final = "gpu_platform_validation_nccl_busbw_gbps"
METRIC_THRESHOLD: Final = "gpu_platform_validation_nccl_threshold_gbps"

#: Python shared by both tests: serve the final metrics as Prometheus text for
#: METRICS_LINGER_SECONDS, then return. The Jobs push nowhere (no pushgateway): Prometheus
#: scrapes the still-running pod through the validation PodMonitor (docs/observability.md
#: "Validation results"); kube-state-metrics' kube_job_status_failed covers a pod that died
#: before it could serve anything.
SERVE_METRICS_PY: Final = """
def serve_metrics(lines):
    import http.server, os, threading, time
    body = ("\\n".join(lines) + "\\n").encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    linger = int(os.environ.get("METRICS_LINGER_SECONDS", "0"))
    if linger <= 0:
        return
    server = http.server.ThreadingHTTPServer(("", int(os.environ["METRICS_PORT"])), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(linger)
    server.shutdown()
"""

#: Driver, GPU count, ECC, NVLink, then a checked fp16 matmul per GPU. Every check prints a
#: `FAIL <check>: ...` line when it fails; the RESULT line and the metrics carry each outcome.
#: nvidia-smi is in the NGC PyTorch image (the container toolkit mounts it with the driver).
#: `ecc.errors.uncorrected.volatile.total` is an nvidia-smi --query-gpu field ("[N/A]" where ECC
#: is off or unsupported: counted as 0); `nvidia-smi nvlink -s` prints one "Link N: <speed>" line
#: per link and "<inactive>" for a link that is down.
SMOKE_SCRIPT: Final = (
    (
        """\
set -eu
python - <<'PY'
import json, os, subprocess, time
"""
        + SERVE_METRICS_PY
        + """
pool, itype = os.environ["POOL"], os.environ["INSTANCE_TYPE"]
expected = int(os.environ["EXPECTED_GPUS"])
checks, report = {}, {"test": "gpu-smoke", "pool": pool, "instance_type": itype}

def fail(check, why):
    checks[check] = False
    print(f"FAIL {check}: {why}", flush=True)

def smi(*args):
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=120)

try:
    out = smi("--query-gpu=driver_version,ecc.errors.uncorrected.volatile.total",
              "--format=csv,noheader")
    rows = [r.split(",") for r in out.stdout.strip().splitlines()] if out.returncode == 0 else []
except (OSError, subprocess.SubprocessError) as err:
    rows, out = [], None
    report["driver_error"] = str(err)
checks["driver"] = bool(rows)
if not rows:
    fail("driver", "nvidia-smi failed: " + (out.stderr.strip() if out else report["driver_error"]))
report["driver"] = rows[0][0].strip() if rows else None
report["gpus_smi"] = len(rows)
checks["gpu_count"] = len(rows) == expected
if len(rows) != expected:
    fail("gpu_count", f"nvidia-smi sees {len(rows)} GPUs, the pool has {expected}")
def ecc(value):
    value = value.strip()
    return int(value) if value.isdigit() else 0
uncorrected = [ecc(r[1]) for r in rows if len(r) > 1]
report["ecc_uncorrected_volatile"] = sum(uncorrected)
checks["ecc"] = sum(uncorrected) == 0
if sum(uncorrected):
    fail("ecc", f"uncorrectable volatile ECC errors per GPU: {uncorrected}")
if os.environ["EXPECT_NVLINK"] == "1":
    links = smi("nvlink", "-s").stdout.splitlines()
    active = [l for l in links if "Link" in l and "inactive" not in l]
    inactive = [l.strip() for l in links if "inactive" in l]
    report["nvlink_active_links"] = len(active)
    checks["nvlink"] = bool(active) and not inactive
    if not checks["nvlink"]:
        fail("nvlink", f"{len(active)} active links, inactive: {inactive}")

import torch
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
report["gpus"] = n
checks["cuda"] = n == expected
if n != expected:
    fail("cuda", f"torch sees {n} CUDA devices, the pool has {expected}")
matmul_ok = n > 0
for i in range(n):
    a = torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.float16)
    b = torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.float16)
    torch.cuda.synchronize(i)
    start = time.perf_counter()
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize(i)
    seconds = time.perf_counter() - start
    ref = (a[:64].float() @ b[:, :64].float())
    close = bool(torch.allclose(c[:64, :64].float(), ref, rtol=5e-2, atol=5e-1))
    matmul_ok = matmul_ok and close
    report[f"gpu{i}_tflops"] = round(20 * 2 * 8192**3 / seconds / 1e12, 1)
    if not close:
        fail("matmul", f"GPU {i} fp16 matmul differs from the fp32 reference")
checks["matmul"] = matmul_ok
ok = all(checks.values())
report["checks"], report["passed"] = checks, ok
print("RESULT " + json.dumps(report, sort_keys=True), flush=True)
if not ok:
    failed = ", ".join(k for k, v in checks.items() if not v)
    print(f"FAIL gpu-smoke on pool {pool}: {failed}", flush=True)
labels = f'test="gpu-smoke",pool="{pool}",instance_type="{itype}"'
serve_metrics([f"METRIC_PASSED{{{labels}}} {int(ok)}"] + [
    f'METRIC_CHECK{{{labels},check="{k}"}} {int(v)}' for k, v in sorted(checks.items())
])
raise SystemExit(0 if ok else 1)
PY
"""
    )
    .replace("METRIC_PASSED", METRIC_PASSED)
    .replace("METRIC_CHECK", METRIC_CHECK)
)

#: PyTorch all_reduce over NCCL (the nccl-tests all_reduce_perf busbw formula,
#: NVIDIA/nccl-tests doc/PERFORMANCE.md: busbw = algbw * 2(n-1)/n). Below the threshold every rank
#: exits 1 after rank 0 printed a FAIL line: the Job fails, kube_job_status_failed and the
#: served gpu_platform_validation_passed 0 raise NcclValidationFailed.
NCCL_SCRIPT: Final = (
    (
        """\
import json, os, time
import torch
import torch.distributed as dist
"""
        + SERVE_METRICS_PY
        + """
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
numel = int(os.environ["MESSAGE_MIB"]) * 1024 * 1024 // 4
buf = torch.ones(numel, dtype=torch.float32, device="cuda")
for _ in range(5):
    dist.all_reduce(buf)
torch.cuda.synchronize()
iters = 20
start = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(buf)
torch.cuda.synchronize()
seconds = (time.perf_counter() - start) / iters
size = numel * 4
algbw = size / seconds / 1e9
busbw = algbw * 2 * (world - 1) / world
threshold = float(os.environ["MIN_BUS_BANDWIDTH_GBPS"])
passed = busbw >= threshold
pool, itype = os.environ["POOL"], os.environ["INSTANCE_TYPE"]
dist.destroy_process_group()
if rank == 0:
    report = {"test": "nccl-all-reduce", "pool": pool, "instance_type": itype,
              "world_size": world, "bytes": size, "fi_provider": os.environ.get("FI_PROVIDER"),
              "algbw_gbps": round(algbw, 2), "busbw_gbps": round(busbw, 2),
              "threshold_gbps": threshold, "passed": passed}
    print("RESULT " + json.dumps(report, sort_keys=True), flush=True)
    if not passed:
        print(f"FAIL nccl-all-reduce: bus bandwidth {busbw:.1f} GB/s < {threshold:g} GB/s "
              f"required on {itype} ({world} ranks, {size} bytes)", flush=True)
    labels = f'test="nccl-all-reduce",pool="{pool}",instance_type="{itype}"'
    serve_metrics([
        f"METRIC_PASSED{{{labels}}} {int(passed)}",
        f"METRIC_BUSBW{{{labels}}} {busbw:.3f}",
        f"METRIC_THRESHOLD{{{labels}}} {threshold:g}",
    ])
raise SystemExit(0 if passed else 1)
"""
    )
    .replace("METRIC_PASSED", METRIC_PASSED)
    .replace("METRIC_BUSBW", METRIC_BUSBW)
    .replace("METRIC_THRESHOLD", METRIC_THRESHOLD)
)
