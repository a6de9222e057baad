"""Running and reading exported `.tflite` files: in LiteRT, in the
tflite-micro interpreter, and what a file holds (`tflite_inspect`).
"""
