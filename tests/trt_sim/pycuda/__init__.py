"""A simulator of the parts of PyCUDA orin-avatar uses (see tests/trt_sim/tensorrt)."""
