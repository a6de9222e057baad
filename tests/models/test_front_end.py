"""The checks every builder shares through its front end."""

import numpy as np
import pytest

from keras_relrec import models

BUILDERS = {
    "drrt_classifier": lambda value: models.drrt_classifier(((6, 2), (6, 2)), 3, mask_value=value),
    "nbof_classifier": lambda value: models.nbof_classifier((6, 2), 3, 4, mask_value=value),
    "recurrent_nbof_classifier": lambda value: models.recurrent_nbof_classifier((6, 2), 3, 4, mask_value=value),
    "tabl_network": lambda value: models.tabl_network(input_shape=(6, 2), num_classes=3, mask_value=value),
}


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("mask_value", ["x", float("nan"), True])
def test_every_builder_refuses_a_mask_value_that_is_not_a_number(builder, mask_value):
    with pytest.raises(ValueError, match=r"`mask_value` must be None or a number.*received mask_value="):
        BUILDERS[builder](mask_value)


def test_the_padding_of_data_is_found_with_a_checked_mask_value():
    with pytest.raises(ValueError, match="mask_value"):
        models.front_end.valid_steps(np.zeros((1, 3, 2)), "x")
    assert models.front_end.valid_steps(np.zeros((1, 3, 2)), np.float32(0.0)).sum() == 0
