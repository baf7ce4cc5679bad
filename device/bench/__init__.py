"""`orin-avatar bench ...`: speed and memory, measured, never asserted by timed tests."""
