"""The generalised models' first implementations (context_updates, shared_stream), kept as the
baseline the bench times their fast versions (icl.core.models, icl/core/accel/kernels) against: layer j of the
models deeper than j, one einsum per term, the per-layer predictors assigned model by model.
Same parameters, same names as the fast stacks. Correctness is judged against icl.core.reference,
like every other path (tests/core/test_reference.py).
"""
from __future__ import annotations

import torch
from torch import nn

from .config import RunConfig
from .models import Cascade, Output
from .tasks import Batch


class Looped(Cascade):
    """The generalised models' first implementation, kept as the reference their fast versions in
    icl.core.models are checked and timed against: layer j of the models deeper than j, one einsum per
    term, the per-layer predictors assigned model by model. Same parameters, same names."""

    def __init__(self, cfg: RunConfig, depths: list[int], in_dim: int):
        if cfg.nonlinearity != "softmax":
            raise ValueError(f"the first implementations compute softmax attention only, not {cfg.nonlinearity!r}")
        super().__init__(cfg, depths, in_dim)

    def active(self, j: int) -> tuple[int, torch.Tensor]:
        n = sum(1 for L in self.depths if L > j)
        return n, self.offsets[:n] + j

    @staticmethod
    def update_prefix(state: torch.Tensor, n: int, new: torch.Tensor) -> torch.Tensor:
        """Replace the first n models' entries (dim 1) without in-place ops on autograd tensors."""
        return new if n == state.shape[1] else torch.cat([new, state[:, n:]], dim=1)


class LoopedContextUpdates(Looped):
    """icl.core.models.ContextUpdates as it was first written (§C.3): one einsum per layer, a loop over
    the models for the per-layer predictors."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim)
        self.readout = nn.Parameter(torch.ones(self.n_models))  # r * v
        self.context_scalar = nn.Parameter(torch.zeros(len(self.layer_model)))  # u_l, starts off

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        B, P = batch.y.shape
        h = batch.y.unsqueeze(1).expand(B, self.n_models, P)
        g = [None] * len(self.layer_model)
        qa, ca = [None] * len(g), [None] * len(g)
        for j in range(max(self.depths)):
            n, idx = self.active(j)
            qx = torch.einsum("mkd,bpd->bmpk", self.query[idx], batch.x)
            kx = torch.einsum("mkd,bpd->bmpk", self.key[idx], batch.x)
            qq = torch.einsum("mkd,bd->bmk", self.query[idx], batch.xq)
            att_q = torch.softmax(torch.einsum("bmk,bmpk->bmp", qq, kx), dim=-1)  # (B, n, P)
            att_c = torch.softmax(torch.einsum("bmpk,bmqk->bmpq", qx, kx), dim=-1)  # (B, n, P, P)
            f = torch.einsum("bmp,bmp->bm", att_q, h[:, :n])  # the query reads the current states
            for m, t in enumerate(idx.tolist()):
                g[t] = f[:, m] * self.readout[m]
                if attention:
                    qa[t], ca[t] = att_q[:, m], att_c[:, m]
            u = self.context_scalar[idx]
            h = self.update_prefix(h, n, h[:, :n] + u[:, None] * torch.einsum("bmpq,bmq->bmp", att_c, h[:, :n]))
        g = torch.stack(g, dim=1) * self.layer_gain  # (B, T)
        out = Output(self.ensemble(g), g)
        if attention:
            out.query_attention, out.context_attention = torch.stack(qa, 1), torch.stack(ca, 1)
        return out


class LoopedSharedStream(Looped):
    """icl.core.models.SharedStream as it was first written (§C.1): one einsum per layer and term, a
    loop over the models for the per-layer predictors."""

    def __init__(self, cfg: RunConfig, depths: list[int]):
        super().__init__(cfg, depths, cfg.dim + 1)
        D = cfg.dim + 1
        self.value = nn.Parameter(torch.eye(D).repeat(self.n_models, 1, 1))  # (M, D, D), copy init
        self.readout = nn.Parameter(nn.functional.one_hot(torch.tensor(D - 1), D).float().repeat(self.n_models, 1))

    def forward(self, batch: Batch, attention: bool = False) -> Output:
        B, P = batch.y.shape
        M = self.n_models
        z = torch.cat([batch.x, batch.y.unsqueeze(-1)], -1).unsqueeze(1).expand(B, M, P, self.in_dim)
        zq = torch.cat([batch.xq, batch.xq.new_zeros(B, 1)], -1).unsqueeze(1).expand(B, M, self.in_dim)
        base = torch.einsum("bmD,mD->bm", zq, self.readout)  # r . z_q^0
        g, qa = [None] * len(self.layer_model), [None] * len(self.layer_model)
        for j in range(max(self.depths)):
            n, idx = self.active(j)
            Q, K, V = self.query[idx], self.key[idx], self.value[:n]
            kz = torch.einsum("mkD,bmpD->bmpk", K, z[:, :n])
            qz = torch.einsum("mkD,bmpD->bmpk", Q, z[:, :n])
            qq = torch.einsum("mkD,bmD->bmk", Q, zq[:, :n])
            att_q = torch.softmax(torch.einsum("bmk,bmpk->bmp", qq, kz), dim=-1)
            att_c = torch.softmax(torch.einsum("bmpk,bmqk->bmpq", qz, kz), dim=-1)
            step = self.update_scale[:n]
            dq = step[:, None] * torch.einsum("bmp,bmpD,mED->bmE", att_q, z[:, :n], V)
            dz = step[:, None, None] * torch.einsum("bmpq,bmqD,mED->bmpE", att_c, z[:, :n], V)
            contrib = torch.einsum("bmE,mE->bm", dq, self.readout[:n])  # r . Delta_l
            for m, t in enumerate(idx.tolist()):
                g[t] = base[:, m] + self.depths[m] * contrib[:, m]
                if attention:
                    qa[t] = att_q[:, m]
            zq = self.update_prefix(zq, n, zq[:, :n] + dq)
            z = self.update_prefix(z, n, z[:, :n] + dz)
        g = torch.stack(g, dim=1)
        pred = torch.einsum("bmD,mD->bm", zq, self.readout)
        return Output(pred, g, torch.stack(qa, 1) if attention else None)


