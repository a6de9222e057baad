"""Weight constraints of keras_relrec."""

from keras_relrec.constraints.unit_interval import UnitInterval
