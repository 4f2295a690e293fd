"""The untrained ensembles of full-rank layers with anisotropic kernels (icl.analysis.baselines,
bounds.anisotropic): their kernel is the one asked for, and the isotropic case is the softmax bound."""
import pytest
import torch

from icl.analysis import baselines, bounds
from icl.core import subspaces
from icl.core.config import RunConfig

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(dim=8, context_length=16, eval_contexts=512)
TOL = 1e-4  # float32 scores: the same read computed two ways agrees to about 1e-6


def fitted(**changes):
    return bounds.contexts(RunConfig(**{**SMALL, **changes}), n_fit=512)


def same_reads(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and float((a - b).abs().max()) < TOL


def isotropic_reads(batch, betas=baselines.BETAS) -> torch.Tensor:
    """The softmax bound's reads of the cosine, shaped as one layer's reads (G, B, 1)."""
    return bounds.softmax_reads(bounds.cosines(batch), batch.y, betas).double()[..., None]


@pytest.mark.parametrize("normalize", [True, False])
def test_isotropic_kernels_read_exactly_the_cosine_of_the_softmax_bound(normalize):
    # raw inputs too: the score divides by the norms, so A = I is the cosine whatever |x| is
    fit, _ = fitted(normalize_inputs=normalize)
    kernels = baselines.anisotropic_kernels(3, baselines.two_level_spectrum(8, 0.0))
    reads = baselines.kernel_reads(fit, kernels)
    for layer in range(3):
        assert same_reads(reads[..., layer:layer + 1], isotropic_reads(fit))


def test_the_isotropic_ensemble_is_the_softmax_bound_curve_at_its_temperature():
    """s = 1: every layer is the same isotropic softmax, so the curve is flat at every depth and
    equals the softmax of the cosine at the chosen beta, readout fitted on the fit set, scored on
    the evaluation set; and within the grid's coarseness of the refined softmax bound."""
    fit, ev = fitted()
    out = baselines.anisotropic_curve(fit, ev, 0.0, [1, 2, 8])
    single = bounds.softmax_bound(fit, ev)
    for L, loss in out["anisotropic"].items():
        beta = out["anisotropic_beta"][L]
        f_fit, f_ev = (bounds._np(bounds.softmax_reads(bounds.cosines(b), b.y, [beta])[0]) for b in (fit, ev))
        want = bounds.relative_loss(bounds.readout(f_fit, bounds._np(fit.target)) * f_ev, bounds._np(ev.target))
        assert loss == pytest.approx(want, rel=1e-5), (L, loss, want)
        assert loss == pytest.approx(single["single"], rel=0.03)  # beta on a coarser grid than the bound's
    assert out["anisotropic_A"] == pytest.approx(out["anisotropic_C"], rel=1e-6)  # identical layers share every error


def test_the_two_level_edge_is_the_random_subspace_layer_of_half_rank():
    # s = 2 on d/2 directions and 0 on the rest: x_q^T U U^T x_mu / (d/2) on the sphere |x| = sqrt(d),
    # which is what layer_reads computes for the first d/2 columns of the same rotation
    fit, _ = fitted()
    rot = subspaces.random_bases(4, 8, 8, torch.Generator().manual_seed(1))
    spectrum = torch.cat([torch.full((4,), 2.0), torch.zeros(4)]).double()
    kernels = ((rot.double() * spectrum) @ rot.double().transpose(1, 2)).float()
    assert same_reads(baselines.kernel_reads(fit, kernels), baselines.layer_reads(fit, rot[..., :4]))


@pytest.mark.parametrize("a", [0.0, 0.2, 0.4, 0.6])
def test_the_kernels_have_the_anisotropy_asked_for_and_mean_eigenvalue_one(a):
    kernels = baselines.anisotropic_kernels(5, baselines.two_level_spectrum(16, a))
    assert subspaces.anisotropy(kernels).tolist() == pytest.approx([a] * 5, abs=1e-5)
    assert torch.allclose(torch.diagonal(kernels, dim1=-2, dim2=-1).sum(-1), torch.full((5,), 16.0), atol=1e-4)
    assert not torch.allclose(kernels[0], kernels[1]) or a == 0  # each layer its own rotation


def test_the_read_check_catches_a_wrong_kernel():
    """The comparison the tests above rely on is not blind: a kernel off by a small anisotropy, by
    a scale (2 I: the temperature doubled) or a transposed-in-norm score all fail it."""
    fit, _ = fitted()
    want = isotropic_reads(fit)
    slightly = baselines.anisotropic_kernels(1, baselines.two_level_spectrum(8, 0.02))
    assert not same_reads(baselines.kernel_reads(fit, slightly), want)
    assert not same_reads(baselines.kernel_reads(fit, 2 * torch.eye(8)[None]), want)
    raw, _ = fitted(normalize_inputs=False)  # the rank-d subspace score x_q . x_mu / d is no cosine off the sphere
    assert not same_reads(baselines.layer_reads(raw, torch.eye(8)[None]), isotropic_reads(raw))


@pytest.mark.parametrize("dim,a,word", [(7, 0.2, "dim 7"), (8, 0.71, "anisotropy 0.71"), (8, -0.1, "anisotropy -0.1")])
def test_an_impossible_spectrum_is_refused_in_one_line(dim, a, word):
    with pytest.raises(ValueError, match=word) as err:
        baselines.two_level_spectrum(dim, a)
    assert "\n" not in str(err.value)


def test_the_anisotropic_ensembles_are_cached(tmp_path, monkeypatch):
    from icl.running.cache import RunCache

    cfg, runs = RunConfig(**SMALL), RunCache(tmp_path)
    calls = []
    real = bounds.baselines.anisotropic_curve
    monkeypatch.setattr(bounds.baselines, "anisotropic_curve", lambda *a: calls.append(1) or real(*a))
    first = bounds.anisotropic(cfg, [0.0, 0.3], [1, 2, 16], 128, cache=runs)
    again = bounds.anisotropic(cfg, [0.0, 0.3], [1, 2, 16], 128, cache=runs)
    assert again == first and len(calls) == 2  # one call per level, the first time only
    assert sorted(first["levels"]) == [0.0, 0.3] and sorted(first["levels"][0.3]["anisotropic"]) == [1, 2, 16]
    assert first["mixture"] <= first["single"]
