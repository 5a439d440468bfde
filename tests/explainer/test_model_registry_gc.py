"""What loading the model made lives as long as the process: out of the garbage collector's way, still freed when
it goes (model_registry._once)."""
import gc
import weakref

from explainer.services.device import model_registry


def test_a_loaded_models_objects_are_frozen_and_still_freed_on_reset(settings):
    settings.EXPLAINER_DEVICE, settings.EXPLAINER_MODEL = "cpu", "bundled"
    model_registry.reset()
    try:
        loaded = model_registry.get_model()
        made = [loaded, loaded.model, loaded.tokenizer, loaded.model.model.layers[0], loaded.description.to_dict()]
        tracked = {id(o) for o in gc.get_objects()}  # the collector's generations: the permanent one is not walked
        assert all(id(o) not in tracked for o in made[:4]) and id(made[4]) in tracked  # a dict made after: tracked
        gone = weakref.ref(loaded.model)
        del loaded, made
    finally:
        model_registry.reset()
    assert gone() is None  # frozen objects are freed by their counts: a reset or a reload leaks nothing
