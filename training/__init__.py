"""The default model's training: data, training, calibration, export (training/SOURCES.md, RESULTS.md)."""
