"""The linear layers' kernel (inference/cpu_linear.py): oneDNN on x86 float32 CPUs, exact enough that greedy runs do
not change, independent of the thread count, and nn.Linear's own forward wherever it does not apply."""
import platform

import pytest
import torch
from torch import nn

from inference import cpu_linear
from inference.cpu_linear import DEFAULT, ONEDNN, OneDnnLinear, kernel_of, resolve, running_on, use_kernel
from inference.forward import torch_threads
from inference.loading import load_model
from tests.inference.arch_helpers import arch_config, tiny_loaded

CPU = torch.device("cpu")
X86 = platform.machine().lower() in ("x86_64", "amd64")
PROMPT = [5, 17, 42, 9, 77, 3, 64, 21, 90, 11]


@pytest.fixture
def two_threads():
    """Two intra-op threads inside the test (the suite runs on one), as the server's model thread has."""
    with torch_threads(2):
        yield


def test_this_machine_has_onednn_where_the_server_would_use_it():
    assert cpu_linear.available() == (X86 and torch.backends.mkldnn.is_available())
    assert cpu_linear.available() or not X86, "the pinned x86 torch wheel ships oneDNN: auto would not use it here"


def test_auto_is_onednn_only_for_float32_on_an_x86_cpu(monkeypatch):
    monkeypatch.delenv("EXPLAINER_CPU_LINEAR", raising=False)
    expected = ONEDNN if cpu_linear.available() else DEFAULT
    assert resolve(None, CPU, torch.float32) == resolve("auto", CPU, torch.float32) == expected
    assert resolve("auto", CPU, torch.bfloat16) == DEFAULT
    assert resolve("auto", torch.device("cuda"), torch.bfloat16) == DEFAULT
    assert resolve("default", CPU, torch.float32) == DEFAULT
    monkeypatch.setenv("EXPLAINER_CPU_LINEAR", "default")
    assert resolve(None, CPU, torch.float32) == DEFAULT


def test_a_wrong_choice_is_a_named_error(monkeypatch):
    monkeypatch.setenv("EXPLAINER_CPU_LINEAR", "mkl")
    with pytest.raises(ValueError, match=r"EXPLAINER_CPU_LINEAR .* one of auto, onednn, default, not 'mkl'"):
        load_model("bundled", device="cpu")
    with pytest.raises(ValueError, match="needs float32 on an x86 CPU"):
        resolve("onednn", torch.device("cuda"), torch.bfloat16)


def test_load_model_sets_and_describes_the_kernel(monkeypatch):
    monkeypatch.delenv("EXPLAINER_CPU_LINEAR", raising=False)
    auto = load_model("bundled", device="cpu")
    default = load_model("bundled", device="cpu", cpu_linear="default")
    linears = [m for m in auto.model.modules() if isinstance(m, nn.Linear)]
    assert linears and auto.description.linear_kernel == kernel_of(auto.model) == resolve(None, CPU, torch.float32)
    assert all(type(m) is (OneDnnLinear if auto.description.linear_kernel == ONEDNN else nn.Linear) for m in linears)
    assert default.description.linear_kernel == DEFAULT
    assert not any(isinstance(m, OneDnnLinear) for m in default.model.modules())
    assert auto.description.to_dict()["linear_kernel"] == auto.description.linear_kernel


@pytest.mark.skipif(not cpu_linear.available(), reason="oneDNN's linear is x86-only (asserted above for x86)")
class TestOnOneDnn:
    @pytest.mark.parametrize("rows", [1, 3, 32, 257])
    @pytest.mark.parametrize("bias", [False, True])
    def test_a_layer_matches_nn_linear_in_float32(self, rows, bias):
        torch.manual_seed(rows)
        layer = nn.Linear(576, 1536, bias=bias)
        x = torch.randn(2, rows, 576)
        with torch.no_grad():
            expected = layer(x)
            use_kernel(layer, ONEDNN)
            got = layer(x)
        assert type(layer) is OneDnnLinear and got.shape == expected.shape and got.dtype == torch.float32
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)
        assert not torch.equal(got, expected) or rows == 1  # it is another kernel, not nn.Linear's again

    def test_a_rows_result_does_not_depend_on_the_thread_count(self, two_threads):
        torch.manual_seed(0)
        layer = nn.Linear(576, 4096, bias=False)
        use_kernel(layer, ONEDNN)
        for rows in (1, 5, 32, 300):
            x = torch.randn(rows, 576)
            with torch.no_grad():
                on_two = layer(x)
                torch.set_num_threads(1)
                on_one = layer(x)
                torch.set_num_threads(2)
            assert torch.equal(on_one, on_two), rows

    def test_a_models_logits_do_not_depend_on_the_thread_count(self, bundled, two_threads):
        assert bundled.description.linear_kernel == ONEDNN
        ids = torch.tensor([PROMPT])
        with torch.no_grad():
            on_two = bundled.model(ids).logits
            torch.set_num_threads(1)
            on_one = bundled.model(ids).logits
        assert torch.equal(on_one, on_two)

    def test_where_it_does_not_apply_nn_linear_runs(self, monkeypatch):
        torch.manual_seed(1)
        layer = nn.Linear(8, 4)
        use_kernel(layer, ONEDNN)
        calls = []
        monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(a) or None, raising=False)
        plain = lambda x: torch.nn.functional.linear(x, layer.weight, layer.bias)  # noqa: E731
        x = torch.randn(3, 8, requires_grad=True)
        out = layer(x)  # autograd on: training the bundled model goes through here
        assert torch.equal(out, plain(x))
        out.sum().backward()
        assert x.grad is not None and layer.weight.grad is not None
        with torch.no_grad():
            for odd in (torch.randn(8), torch.randn(0, 8)):  # a single vector, no rows
                assert torch.equal(layer(odd), plain(odd))
            layer.bfloat16()
            half = torch.randn(3, 8).bfloat16()
            assert torch.equal(layer(half), plain(half))
        assert calls == []

    def test_switching_keeps_weights_ties_and_names(self, two_threads):
        loaded = tiny_loaded(arch_config("llama"))
        model = loaded.model
        head, table = model.get_output_embeddings(), model.get_input_embeddings()
        keys, weight = list(model.state_dict()), head.weight
        with running_on(model, DEFAULT):
            assert kernel_of(model) == DEFAULT and not any(isinstance(m, OneDnnLinear) for m in model.modules())
        assert kernel_of(model) == ONEDNN and head.weight is weight and list(model.state_dict()) == keys
        assert isinstance(head, nn.Linear) and (head.weight.data_ptr() == table.weight.data_ptr()) == bool(
            loaded.description.tied_lm_head)
        with pytest.raises(RuntimeError), running_on(model, DEFAULT):
            raise RuntimeError("a comparison failed")
        assert kernel_of(model) == ONEDNN  # put back after a failure too

    @pytest.mark.parametrize("name", ["smollm2", "llama", "qwen2", "phi3"])
    def test_greedy_tokens_and_logits_as_with_torchs_default(self, name, request, two_threads):
        """Exactness against nn.Linear's own kernel: greedy tokens identical, logits within 1e-4 (float32)."""
        if name == "smollm2":
            loaded = request.getfixturevalue("smollm2")
            ids = loaded.tokenizer.apply_chat_template([{"role": "user", "content": "Why is the sea salty?"}],
                                                       add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
        else:
            loaded, ids = tiny_loaded(arch_config(name)), torch.tensor([PROMPT])
        assert loaded.description.linear_kernel == ONEDNN
        runs = {}
        for kernel in (ONEDNN, DEFAULT):
            with running_on(loaded.model, kernel), torch.no_grad():
                out = loaded.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=16,
                                            min_new_tokens=16, output_logits=True, return_dict_in_generate=True)
                runs[kernel] = (out.sequences[0, ids.shape[1]:].tolist(), torch.stack(out.logits))
        assert runs[ONEDNN][0] == runs[DEFAULT][0]
        torch.testing.assert_close(runs[ONEDNN][1], runs[DEFAULT][1], rtol=0, atol=1e-4)
