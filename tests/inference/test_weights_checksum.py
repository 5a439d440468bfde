"""The weights checksum that the article's "the weights did not change" check compares (inference/article_checks.py)."""
import torch

from inference import article_checks


def test_the_checksum_is_float64_sums_and_changes_no_parameter_of_any_dtype():
    """One float64 copy per parameter, made absolute in place: the copy, never the parameter (a float64 parameter's
    .double() is the parameter itself)."""
    parameters = [torch.nn.Parameter(torch.tensor(values, dtype=dtype)) for values, dtype in
                  [([-1.5, 2.25, -3.0], torch.float64), ([-0.5, 4.0], torch.float32), ([-2.0, 1.0], torch.bfloat16)]]
    before = [p.detach().clone() for p in parameters]
    with torch.no_grad():
        sums = article_checks.parameter_sums(parameters)
    assert sums == [(-2.25, 6.75), (3.5, 4.5), (-1.0, 3.0)]
    assert all(torch.equal(p.detach(), b) for p, b in zip(parameters, before))
