"""What the Python package adds to xhal's own cost, in one run (`make bench-python`).

For each device (labels as arguments; cpu, vulkan and opencl by default): the same launch (one
buffer, one scalar, one workgroup) queued 20,000 times back to back, per launch, in wall time
and in the calling thread's CPU time (which leaves out the device's own threads, that share the
cores with it and make the wall time of back-to-back launches vary); and 64 MiB uploaded into
a new array and downloaded into a new host array, in GB/s. The Rust figures come from
hal/sdk/benches/python_baseline.rs, run here on the same device; Rust and Python alternate,
twice each, and each figure is the median of their rounds (7 per run). `--json` prints the
figures as JSON.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

import xhal

KERNEL = """
var<immediate> n: u32;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn touch(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < n { out[0] = n; }
}
"""
LAUNCHES = 20_000
ROUNDS = 7
BYTES = 64 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def median(values):
    return sorted(values)[len(values) // 2]


def rust(label):
    environment = dict(os.environ, XHAL_DEVICE=label, XHAL_PLUGIN_PATH=os.path.join(ROOT, "target", "plugins"))
    result = subprocess.run(
        ["cargo", "bench", "--quiet", "-p", "xhal", "--bench", "python_baseline"],
        cwd=ROOT, env=environment, capture_output=True, text=True, check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def python(label):
    dev = xhal.device(label)
    stream = dev.stream()
    touch = dev.load_wgsl(KERNEL).kernel("touch")
    out = dev.zeros(1, dtype="uint32")
    launches, cpu = [], []
    for _ in range(ROUNDS):
        stream.synchronize()
        start, start_cpu = time.perf_counter(), time.thread_time()
        for _ in range(LAUNCHES):
            touch(out, n=1, workgroups=1, stream=stream)
        cpu.append((time.thread_time() - start_cpu) / LAUNCHES * 1e6)
        launches.append((time.perf_counter() - start) / LAUNCHES * 1e6)
        stream.synchronize()
    host = (np.arange(BYTES) % 256).astype(np.uint8)
    upload, download = [], []
    for _ in range(ROUNDS):
        stream.synchronize()
        start = time.perf_counter()
        a = dev.asarray(host, stream=stream)
        upload.append(BYTES / (time.perf_counter() - start) / 1e9)
        start = time.perf_counter()
        back = a.numpy(stream=stream)
        download.append(BYTES / (time.perf_counter() - start) / 1e9)
        assert back.nbytes == BYTES
        del a
    return {
        "device": dev.label,
        "launch_enqueue_us": median(launches),
        "launch_cpu_us": median(cpu),
        "upload_gb_s": median(upload),
        "download_gb_s": median(download),
    }


def main():
    arguments = [a for a in sys.argv[1:] if a != "--json"]
    labels = arguments or ["cpu", "vulkan", "opencl"]
    rows = []
    for label in labels:
        print(f"bench-python: {label} ...", file=sys.stderr)
        runs = [rust(label), python(label), rust(label), python(label)]
        r = {key: median([runs[0][key], runs[2][key]]) if key != "device" else runs[0][key] for key in runs[0]}
        p = {key: median([runs[1][key], runs[3][key]]) if key != "device" else runs[1][key] for key in runs[1]}
        rows.append({
            "device": p["device"],
            "rust": r,
            "python": p,
            "launch_added_us": p["launch_enqueue_us"] - r["launch_enqueue_us"],
            "launch_cpu_added_us": p["launch_cpu_us"] - r["launch_cpu_us"],
            "upload_ratio": p["upload_gb_s"] / r["upload_gb_s"],
            "download_ratio": p["download_gb_s"] / r["download_gb_s"],
        })
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=2))
        return
    print("| device | launch wall, Rust / Python | added | launch CPU, Rust / Python | added | upload Rust / Python | ratio | download Rust / Python | ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        r, p = row["rust"], row["python"]
        print(
            f"| {row['device']} | {r['launch_enqueue_us']:.2f} / {p['launch_enqueue_us']:.2f} µs | "
            f"{row['launch_added_us']:+.2f} µs | {r['launch_cpu_us']:.2f} / {p['launch_cpu_us']:.2f} µs | "
            f"{row['launch_cpu_added_us']:+.2f} µs | {r['upload_gb_s']:.2f} / {p['upload_gb_s']:.2f} GB/s | "
            f"{row['upload_ratio']:.2f}x | {r['download_gb_s']:.2f} / {p['download_gb_s']:.2f} GB/s | "
            f"{row['download_ratio']:.2f}x |"
        )


if __name__ == "__main__":
    main()
