import os

# The suite runs on TensorFlow; the JAX checks start their own processes.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
