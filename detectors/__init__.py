"""On-device detectors for the microphone stream: voice activity and the wake phrase."""
