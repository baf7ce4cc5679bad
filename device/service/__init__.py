"""Running as a systemd service: readiness and watchdog, status, logging, the daemon itself."""
