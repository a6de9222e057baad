"""From the traced endpoints to a checked `.tflite` file: `export_tflite`,
the passes over the converted file, and each target's check of it (TFLite
Micro's and the accelerators' included).
"""
