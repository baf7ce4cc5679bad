"""The robot's eyes: camera capture, and visitors' engagement from the faces it sees."""
