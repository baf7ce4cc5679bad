"""The turn loop: microphone frames -> endpoint -> ASR -> dialogue -> streamed speech and visemes."""
