"""A pytest test as a harness: ``kernelopt profile softmax.py --harness test_softmax.py::test_softmax_matches_torch``.

Gate 3 then checks that the test still passes with a candidate kernel in place.
"""

import torch
from softmax import DEVICE, softmax


def test_softmax_matches_torch():
    torch.manual_seed(0)
    x = torch.randn(5, 97, device=DEVICE)
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=1))
