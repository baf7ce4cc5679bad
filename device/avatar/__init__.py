"""The avatar: a 2D face drawn with OpenCV, its idle life and lip-sync, and the displays it goes to."""
