"""The relational memory under JAX's ModelParallel: its largest kernels,
named by their stable weight paths in a LayoutMap, shard over two host
devices and the model computes and trains as unsharded (in a process of its
own: XLA makes the devices when JAX starts)."""

import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).parent


def test_layout_map_shards_the_largest_kernels():
    result = subprocess.run(
        [sys.executable, str(HERE / "model_parallel_worker.py")],
        env={**os.environ, "KERAS_BACKEND": "jax", "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
             "PYTHONPATH": str(HERE.parent.parent.parent)},
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[0] == "ok", result.stdout
