"""TensorRT engines with a CPU fallback (ONNX Runtime) per model, and the model store they come from.

ONNX Runtime sends usage telemetry unless `ORT_DISABLE_TELEMETRY` is set before it loads: 1.32 resolves
mobile.events.data.microsoft.com from its first seconds on and keeps a device id under ~/.cache/Microsoft,
and its Python `disable_telemetry_events()` does not stop it. Every module of this product that loads
ONNX Runtime is in this package or imports it first, so setting it here keeps every command, the daemon
and the processes they start offline (tests/test_offline.py records their connections).
"""

import os

os.environ["ORT_DISABLE_TELEMETRY"] = "1"
