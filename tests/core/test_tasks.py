"""Statistics of the task generator (paper §2.1; our choices: README, "Modelling choices that are
ours"), checked against theory or against an independent numpy recomputation."""
import numpy as np
import pytest
import torch
from conftest import tiny_batch, tiny_config

from icl.core.tasks import haar_rotations, mode_labels, power_spectrum

pytestmark = pytest.mark.usefixtures("one_thread")


def spectrum_np(d: int, exponent: float) -> np.ndarray:
    s = np.arange(1, d + 1, dtype=float) ** -exponent
    return s * d / s.sum()


@pytest.mark.parametrize("a,b", [(0.0, 0.0), (1.5, 1.5)])
def test_label_variance_matches_theory(a, b):
    # y = w.x with x ~ N(0, O diag(lambda) O^T), w ~ N(0, O diag(omega) O^T / d) sharing O:
    # E[y^2] = sum_k lambda_k omega_k / d (1 when isotropic, 2.58 for a = b = 1.5 at d = 8;
    # a teacher rotated independently of the inputs would give 1).
    cfg = tiny_config(dim=8, context_length=16, input_exponent=a, task_exponent=b, normalize_inputs=False)
    y = tiny_batch(cfg, n=6000).y.double()
    theory = (spectrum_np(8, a) * spectrum_np(8, b)).sum() / 8
    assert float((y**2).mean()) == pytest.approx(theory, rel=0.08)
    assert abs(float(y.mean())) < 0.05 * theory**0.5


def test_label_noise_adds_its_variance():
    cfg = tiny_config(dim=8, context_length=16, normalize_inputs=False)
    clean = tiny_batch(cfg, n=4000)
    noisy = tiny_batch(cfg.replace(label_noise=0.5), n=4000)
    assert torch.equal(clean.x, noisy.x)  # noise is drawn after everything else
    assert float(((noisy.y - clean.y) ** 2).mean()) == pytest.approx(0.25, rel=0.05)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_top_k_target_recomputed_with_numpy(k, normalize):
    cfg = tiny_config(task="difficult", top_k=k, normalize_inputs=normalize, input_exponent=1.0)
    batch = tiny_batch(cfg, n=64)
    x, y, xq = (t.double().numpy() for t in (batch.x, batch.y, batch.xq))
    cos = np.einsum("bpd,bd->bp", x, xq) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(xq, axis=-1)[:, None])
    top = np.argsort(-cos, axis=-1)[:, :k]  # (B, k) the k most similar context tokens
    expected = np.take_along_axis(y, top, axis=-1).mean(-1)
    np.testing.assert_allclose(batch.target.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert np.allclose(batch.weights.sum(-1).numpy(), 1.0)
    assert ((batch.weights > 0).sum(-1) == k).all()


@pytest.mark.parametrize("normalize", [True, False])
def test_easy_query_is_a_context_token_and_target_its_label(normalize):
    cfg = tiny_config(task="easy", normalize_inputs=normalize)
    batch = tiny_batch(cfg, n=256)
    dist = (batch.x - batch.xq[:, None, :]).norm(dim=-1)  # (B, P)
    match = dist.argmin(-1)
    assert float(dist.min(-1).values.max()) < 1e-5  # the query is (a copy of) a context token
    rows = torch.arange(len(batch))
    torch.testing.assert_close(batch.target, batch.y[rows, match])
    assert torch.equal(batch.weights.argmax(-1), match)
    # The copied token is chosen uniformly: every position is hit (256 draws over 12 positions).
    assert len(set(match.tolist())) == cfg.context_length


def test_rotations_are_orthogonal_and_haar():
    rot = haar_rotations(4000, 5, torch.Generator().manual_seed(1)).double()  # (n, d, d)
    eye = torch.eye(5, dtype=torch.float64)
    assert torch.allclose(rot.transpose(1, 2) @ rot, eye.expand_as(rot), atol=1e-5)
    # Haar on O(d): every entry has mean 0 and variance 1/d; determinants +1 and -1 equally often.
    assert float(rot.mean(0).abs().max()) < 0.05
    assert torch.allclose((rot**2).mean(0), torch.full((5, 5), 0.2, dtype=torch.float64), atol=0.02)
    assert abs(float(torch.linalg.det(rot).sign().mean())) < 0.1


def test_rotated_covariance_spectrum():
    d, lam = 6, spectrum_np(6, 1.5)
    cfg = tiny_config(dim=d, context_length=3000, input_exponent=1.5, task_exponent=1.0, normalize_inputs=False)
    batch = tiny_batch(cfg, n=200)
    x, rot = batch.x.double(), batch.rotation.double()
    # Per context, in its own eigenbasis, the sample covariance is diag(lambda): O^T Sigma_c O.
    cov = torch.einsum("bpi,bpj->bij", x, x) / cfg.context_length  # (B, d, d)
    local = rot.transpose(1, 2) @ cov @ rot
    np.testing.assert_allclose(local.mean(0).numpy(), np.diag(lam), atol=0.03)
    np.testing.assert_allclose(torch.diagonal(local, dim1=1, dim2=2)[0].numpy(), lam, rtol=0.15)
    # Averaged over contexts the directions are random: O diag(lambda) O^T -> mean(lambda) I = I.
    avg = torch.einsum("bij,j,bkj->ik", rot, torch.tensor(lam), rot) / len(batch)
    np.testing.assert_allclose(np.linalg.eigvalsh(avg.numpy()), np.full(d, lam.mean()), atol=0.15)
    # The teacher lives in the same basis: (O^T w)_k has variance omega_k / d.
    tw = torch.einsum("bij,bi->bj", rot, batch.teacher.double())
    np.testing.assert_allclose((tw**2).mean(0).numpy(), spectrum_np(d, 1.0) / d, rtol=0.3)


@pytest.mark.parametrize("exponent", [0.0, 0.7, 2.0])
def test_power_spectrum_sums_to_dim_and_decays(exponent):
    s = power_spectrum(7, exponent).double()
    assert float(s.sum()) == pytest.approx(7.0, rel=1e-6)
    np.testing.assert_allclose(s.numpy(), spectrum_np(7, exponent), rtol=1e-6)


def test_normalized_inputs_lie_on_the_sphere():
    for task in ("easy", "difficult"):
        cfg = tiny_config(task=task, input_exponent=1.0, normalize_inputs=True)
        batch = tiny_batch(cfg, n=32)
        r = cfg.dim**0.5
        torch.testing.assert_close(batch.x.norm(dim=-1), torch.full((32, cfg.context_length), r))
        torch.testing.assert_close(batch.xq.norm(dim=-1), torch.full((32,), r))
        # Labels come from the normalised inputs.
        torch.testing.assert_close(batch.y, torch.einsum("bpd,bd->bp", batch.x, batch.teacher))


def test_mode_labels_sum_back_to_the_labels():
    # Labels are linear in the teacher: y = sum_k (O^T w)_k x.(O e_k).
    batch = tiny_batch(tiny_config(), n=16)
    coeff = torch.einsum("bdk,bd->kb", batch.rotation, batch.teacher)  # (d, B)
    rebuilt = (mode_labels(batch) * coeff[:, :, None]).sum(0)
    torch.testing.assert_close(rebuilt, batch.y, rtol=1e-4, atol=1e-5)


def test_same_seed_same_contexts_other_seed_other_contexts():
    cfg = tiny_config()
    a, b, c = tiny_batch(cfg, seed=3), tiny_batch(cfg, seed=3), tiny_batch(cfg, seed=4)
    assert all(torch.equal(s, t) for s, t in zip(a.tensors(), b.tensors()))
    assert not torch.equal(a.x, c.x)
