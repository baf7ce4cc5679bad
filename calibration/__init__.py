"""`orin-avatar calibrate`: targets, representative data and gates, and the tables that ship
(package data). The table format and its TensorRT renderings live in engines/, which consumes them."""

from pathlib import Path

TABLES_DIR = Path(__file__).parent / "tables"  # one <model>.json per model that runs in INT8
