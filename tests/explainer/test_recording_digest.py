"""A recording's digest (explainer/services/run/provenance.py) hashes each payload as a browser writes it back:
integral floats as ints. A step's top keys and weights come as PlainLists, built without integral floats, which
the digest takes as they are: the bytes are the ones a full walk gives, so recordings stored before still verify."""
from hypothesis import given, settings

from explainer.services.run import provenance
from inference.capture import head_top_keys
from tests.inference.test_top_keys_bytes import attention_rows


@settings(max_examples=100, deadline=None)
@given(attention_rows())
def test_the_top_lists_are_plain_so_a_recordings_digest_takes_them_as_they_are(attn):
    top = head_top_keys(attn)
    flat = [w for layer in top.weights for head in layer for w in head]
    assert not any(isinstance(w, float) and w.is_integer() for w in flat)
    step = {"attention": {"top_keys": top.keys, "top_weights": top.weights}, "prob": 1.0}
    walked = {"attention": {"top_keys": list(top.keys), "top_weights": [list(x) for x in top.weights]}, "prob": 1.0}
    assert provenance.canonical(step) == provenance.canonical(walked)
