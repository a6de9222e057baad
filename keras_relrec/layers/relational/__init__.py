"""Relational recurrent layers."""

from keras_relrec.layers.relational.relational_memory_cell import RelationalMemoryCell
