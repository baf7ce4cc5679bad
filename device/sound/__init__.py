"""Microphones and speakers: the daemon's audio in and out."""
