"""Kernels against PyTorch eager: exact values and dtypes, NAC's argument encoding undone."""
import operator

import pytest
import torch
import torch.nn.functional as F

from nac_engine.runtime import Kernels, NotSupported
from nac_engine.runtime.kernels import bind, first_of_multi

K = Kernels()
torch.manual_seed(0)


def same(got, want):
    assert isinstance(got, torch.Tensor)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert torch.equal(got, want)


def test_gelu_is_exact_erf_not_tanh():
    x = torch.linspace(-4, 4, 101)
    got = K("aten.gelu.default")(x)
    same(got, F.gelu(x))
    assert not torch.allclose(got, F.gelu(x, approximate="tanh"), atol=1e-6, rtol=0)
    same(K("aten.gelu.default")(x, "tanh"), F.gelu(x, approximate="tanh"))   # kwarg value, unnamed


@pytest.mark.parametrize("dim", [1, -2, 3, -1])
def test_squeeze_dim_arrives_as_nac_view(dim):
    x = torch.randn(2, 1, 3, 1)
    same(K("nac.view")(x, dim), torch.squeeze(x, dim))


def test_nac_view_squeeze_edge_cases():
    x = torch.randn(2, 1, 3)
    same(K("nac.view")(x, 0), torch.squeeze(x, 0))        # not size 1: torch leaves it alone
    same(K("nac.view")(x), torch.squeeze(x))             # aten.squeeze.default
    same(K("nac.view")(x, (3, 2)), x.reshape(3, 2))      # aten.view.default
    same(K("nac.view")(x, (-1,)), x.reshape(-1))
    same(K("nac.view")(x, 3, 2), x.reshape(3, 2))        # symbolic dims as separate args
    same(K("nac.view")(x, torch.tensor(6)), x.reshape(6))  # view(x, [s0]) with s0 = numel


def test_rsub_arrives_swapped():
    t = torch.randn(4)
    same(K("nac.sub")(1.0, t), torch.rsub(t, 1.0))
    same(K("nac.sub")(2, t, 3), torch.rsub(t, 2, alpha=3))
    i = torch.arange(4)
    same(K("nac.sub")(1, i), torch.rsub(i, 1))


def test_masked_fill_arrives_as_where():
    x = torch.randn(3, 4)
    mask = x > 0
    same(K("nac.where")(mask, -1e9, x), x.masked_fill(mask, -1e9))
    xi = torch.arange(12).reshape(3, 4)
    same(K("nac.where")(xi > 5, 7, xi), xi.masked_fill(xi > 5, 7))       # keeps int64
    same(K("nac.where")(xi > 5, 2.5, xi), xi.masked_fill(xi > 5, 2.5))   # masked_fill's dtype, not where's
    y = torch.randn(3, 4)
    same(K("nac.where")(mask, x, y), torch.where(mask, x, y))


def test_dtype_strings_become_torch_dtypes():
    x = torch.randn(2, 3)
    same(K("aten._to_copy.default")(x, "float16"), x.to(torch.float16))
    same(K("nac.zeros")((2, 3), "int64"), torch.zeros(2, 3, dtype=torch.int64))
    same(K("nac.ones")((2,), "float64", "strided", "cpu", False), torch.ones(2, dtype=torch.float64))
    same(K("nac.full")((2, 2), 1.5, "float16"), torch.full((2, 2), 1.5, dtype=torch.float16))
    same(K("nac.full")((2,), 3), torch.full((2,), 3))                      # int fill → int64
    same(K("nac.zeros_like")(x, "int32"), torch.zeros_like(x, dtype=torch.int32))
    same(K("nac.ones_like")(x), torch.ones_like(x))
    same(K("nac.full_like")(x, 2, "float64"), torch.full_like(x, 2, dtype=torch.float64))
    same(K("nac.new_zeros")(x, (4,)), x.new_zeros(4))
    same(K("nac.new_ones")(x, (1, 2), "int8"), x.new_ones((1, 2), dtype=torch.int8))
    same(K("nac.zeros")(3), torch.zeros(3))                                 # bare int size
    # keyword values come without names; device skips the absent layout
    same(K("nac.arange")(8, "int64", "cpu", False), torch.arange(8, dtype=torch.int64))
    same(K("nac.arange")(8), torch.arange(8))
    same(K("nac.arange")(2, 8), torch.arange(2, 8))
    same(K("nac.arange")(0.0, 1.0, 0.25), torch.arange(0.0, 1.0, 0.25))
    same(K("aten.sum.dim_IntList")(x, (1,), False, "float64"), x.sum(1, dtype=torch.float64))


def test_device_strings_run_on_the_session_device():
    same(K("nac.zeros")((2,), "float32", "cuda:0"), torch.zeros(2))


def test_memory_format_and_copy():
    x = torch.randn(1, 3, 4, 4)
    y = K("nac.clone")(x, "channels_last")
    assert y.is_contiguous(memory_format=torch.channels_last) and torch.equal(y, x)
    same(K("nac.clone")(x, "contiguous_format"), x.clone())
    src = torch.arange(4, dtype=torch.int64)
    same(K("nac.clone")(torch.zeros(2, 4), src), torch.zeros(2, 4).copy_(src))  # copy(self, src)


def test_standard_binary_ops_match_torch():
    a, b = torch.randn(3, 4), torch.randn(4)
    same(K("nac.add")(a, b), a + b)
    same(K("nac.add")(a, b, 2), torch.add(a, b, alpha=2))
    same(K("nac.mul")(a, 2.0), a * 2.0)
    same(K("nac.div")(torch.arange(4), 2), torch.arange(4) / 2)            # true division → float
    same(K("nac.div")(torch.arange(4), 2, "floor"), torch.div(torch.arange(4), 2, rounding_mode="floor"))
    same(K("nac.gt")(a, 0), a > 0)
    same(K("nac.le")(a, b), a <= b)
    same(K("nac.neg")(a), -a)
    m = torch.randn(4, 2)
    same(K("nac.matmul")(a, m), a @ m)
    same(K("nac.transpose")(a, -1, -2), a.transpose(-1, -2))
    same(K("nac.transpose")(a), a.t())
    same(K("nac.pass")(a, 0.1, False), a)
    assert K("nac.mul")(3, 4) == 12 and K("nac.add")(3, 4) == 7     # symbolic-shape arithmetic


def test_matmul_broadcasts_like_torch():
    a, m = torch.randn(2, 3, 4), torch.randn(4, 2)
    same(K("nac.matmul")(a, m), torch.matmul(a, m))


def test_dynamic_aten_dispatch_without_a_kernel():
    x = torch.randn(10) * 3
    same(K("aten.hardtanh.default")(x, -0.5, 0.5), F.hardtanh(x, -0.5, 0.5))
    same(K("aten.hardtanh.default")(x), F.hardtanh(x))
    same(K("aten.logsumexp.default")(x.reshape(2, 5), (1,), True), torch.logsumexp(x.reshape(2, 5), 1, True))
    y = torch.randn(2, 3, 4)
    same(K("aten.permute.default")(y, (2, 0, 1)), y.permute(2, 0, 1))
    same(K("aten.slice.Tensor")(y, 2, 1, 9223372036854775807), y[:, :, 1:])
    r = torch.randn(1, 4)
    same(K("aten.expand.default")(r, (3, -1)), r.expand(3, -1))
    idx = torch.tensor([0, 2])
    same(K("aten.index.Tensor")(y, (None, idx)), y[:, idx])
    same(K("aten.cat.default")((y, y), -1), torch.cat((y, y), -1))
    assert K("aten.sym_size.int")(y, 1) == 3
    same(K("aten.contiguous.default")(y.transpose(0, 1)), y.transpose(0, 1).contiguous())


def test_call_method_names_fall_back_to_tensor_methods():
    x = torch.arange(4)
    same(K("aten.float.default")(x), x.float())


def test_getitem_and_multi_output_results():
    x = torch.randn(6, 4)
    parts = K("aten.split.Tensor")(x, 2)
    assert isinstance(parts, list)
    same(K("getitem")(parts, 1), x[2:4])
    ln = K("aten.native_layer_norm.default")(x, (4,), None, None, 1e-5)
    assert isinstance(ln, tuple)
    same(first_of_multi(ln), F.layer_norm(x, (4,)))
    assert first_of_multi(parts) is parts
    assert K("floordiv")(7, 2) == operator.floordiv(7, 2)


def test_layer_norm_with_and_without_trailing_args():
    x, w, b = torch.randn(2, 8), torch.randn(8), torch.randn(8)
    same(K("aten.layer_norm.default")(x, (8,), w, b), F.layer_norm(x, (8,), w, b))
    same(K("aten.layer_norm.default")(x, (8,), w, b, 1e-12, True), F.layer_norm(x, (8,), w, b, 1e-12))


def test_binding_skips_absent_keyword_arguments():
    op = torch.ops.aten._to_copy.default
    pos, kw = bind(op, (torch.ones(1), "float64", "cpu", "contiguous_format"))
    assert kw == {"dtype": torch.float64, "device": torch.device("cpu"),
                  "memory_format": torch.contiguous_format}


def test_none_for_a_defaulted_argument_keeps_the_default():
    x = torch.randn(2, 3)
    same(K("aten.sum.dim_IntList")(x, (1,), None, "float64"), x.sum(1, dtype=torch.float64))
    same(K("aten.softmax.int")(x, -1, None), torch.softmax(x, -1))


def test_unknown_ops_are_not_supported():
    with pytest.raises(NotSupported, match="no_such_op"):
        K("aten.no_such_op.default")
    with pytest.raises(NotSupported, match="overload"):
        K("aten.relu.no_such_overload")
    with pytest.raises(NotSupported):
        K("my.custom.op")
    with pytest.raises(NotSupported):
        K("nac.gather")


def test_flattened_tensor_lists_are_regrouped_by_schema():
    # research §5.2: cat([a, b], 1) is stored as (a, b, 1); index(a, [None, i]) as (a, None, i)
    from nac_engine.runtime.kernels import Kernels
    k = Kernels()
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    i = torch.tensor([2, 0])
    assert torch.equal(k("aten.cat.default")(a, b, a, 1), torch.cat([a, b, a], 1))
    assert torch.equal(k("aten.cat.default")(a, b), torch.cat([a, b]))
    assert torch.equal(k("aten.stack.default")(a, b, 1), torch.stack([a, b], 1))
    assert torch.equal(k("aten.index.Tensor")(a, None, i), a[:, i])
    # a Tensor[] followed by a Tensor: the list must leave the last tensor to `values`
    v = torch.full((2, 2), 7.0)
    expect = a.clone()
    expect[:, i] = v
    assert torch.equal(k("aten.index_put.default")(a, None, i, v), expect)
    with pytest.raises(Exception):
        k("aten.cat.default")(a, "not a tensor")


def test_regrouping_does_not_turn_a_trailing_flag_into_the_values_tensor():
    # index_put(x, [i], v, True) is stored as (x, i, v, True): `indices` must stop before v
    from nac_engine.runtime.kernels import Kernels
    x, i, v = torch.zeros(5), torch.tensor([1, 1, 3]), torch.tensor([1.0, 2.0, 3.0])
    got = Kernels()("aten.index_put.default")(x, i, v, True)
    assert torch.equal(got, torch.index_put(x, (i,), v, accumulate=True))


def test_grouped_mm_of_mixture_of_experts_layers():
    """``transformers.grouped_mm_fallback`` (what Mixtral, Qwen-MoE and OLMoE expert layers export
    to): rows offs[i-1]:offs[i] times expert i's weight, empty groups allowed; offsets that are not
    cumulative counts of the rows are the kernel's clean error; on the meta device, the shape."""
    fn = K("transformers.grouped_mm_fallback.default")
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(7, 4, generator=g), torch.randn(3, 4, 5, generator=g)
    offs = torch.tensor([2, 2, 7], dtype=torch.int32)                 # expert 1 gets no token
    want = torch.cat([x[0:2] @ w[0], x[2:7] @ w[2]])
    torch.testing.assert_close(fn(x, w, offs), want, rtol=0, atol=1e-6)
    for bad in ([3, 2, 7], [2, 2, 9], [1, 2, 3, 7]):
        with pytest.raises(ValueError, match="grouped_mm"):
            fn(x, w, torch.tensor(bad))
    meta = fn(x.to("meta"), w.to("meta"), offs.to("meta"))
    assert meta.is_meta and tuple(meta.shape) == (7, 5)
