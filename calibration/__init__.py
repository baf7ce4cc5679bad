"""INT8 calibration: the portable table format, its renderings, and the tables that ship."""

from pathlib import Path

TABLES_DIR = Path(__file__).parent / "tables"  # one <model>.json per model that runs in INT8
