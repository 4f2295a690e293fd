# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Generalised models (paper §C.1–C.3, claims C7 and C8)
#
# **Question.** The controlled softmax model of notebook 03 is deliberately simple: inputs never
# change, one scalar value is shared by every layer, and the context labels stay fixed, so the
# prediction is an average of independent attention predictors. Does its depth gain survive when
# each of those simplifications is lifted, one at a time?
#
# - **C.1 shared stream**: input and label live in one state `z = [x; y]` (d + 1 numbers) that every
#   layer updates, for context tokens and the query alike; scores come from the current states, one
#   value matrix `V` is shared by all layers, and the prediction is a linear readout of the query's
#   final state.
# - **C.2 untied values**: each layer gets its own value (a scalar, since labels are scalars)
#   instead of one shared by all layers.
# - **C.3 context updates**: context labels are rewritten between layers by softmax attention among
#   the context tokens, `h_μ ← h_μ + u_l Σ_ν A_{μν} h_ν`, with a learned scalar `u_l` per layer.
#
# **Our choices** (the summary of the paper does not give them): every update of the shared stream
# carries the 1/L residual factor; the shared stream's layerwise predictors (for the decomposition)
# are `g_l = r·z_q⁰ + L r·Δ_l`, whose mean is the prediction; in C.3 the query reads the context
# states *before* a layer rewrites them, so the last layer's `u_l` is never used (it stays at its
# initial 0 and is left out of every summary), and `u_l` has no 1/L factor.
#
# **Scale.** C.1 and C.3 compute a P × P attention among context tokens in every layer, which
# costs far more than the controlled model's single query row. On a CPU both run in C kernels
# (`icl.native`) that take one (model, context) pair through all its layers with its states in
# cache and recompute attention in the backward pass instead of storing it; `icl bench` measures
# them against their first implementation (README, "Speed"). The `quick` profile runs depths
# 1–64 for every model at P = 64, batches of 64 and 1,000 steps (the `timing` table below gives
# the seconds per step measured in this run): 1,000 steps are still below the paper's budget, and
# the deep full-rank runs are flagged where they have not reached their plateau. The `paper` profile
# widens all of these on a GPU.
#
# **The rank axis.** As in notebook 03, every sweep runs at each `key_dim` in `key_dims`: a
# rank-limited one (4 at d = 16) and full rank (16), where the controlled model shows no depth gain
# at all. C7 and C8 are judged at each rank, so the generalised models answer the same question.
#
# **Learning rate.** 0.01 for every model, from a pilot of the shared stream (batch 64, 600 steps):
# with 0.003 every depth ended higher (depth 16: 0.60 against 0.50) and was still falling. The
# controlled model at 0.01 ends within a few per cent of a 2,000-step run at 0.003.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from icl import bounds, claims
from icl import notebook as nb
from icl import plots, tables
from icl.sweep import runs_of

plots.style()

# %% tags=["parameters"]
profile = "quick"  # which params/<profile>/ file these values came from (informational)
output_dir = "outputs/04_generalized"  # figures, tables, results.json (relative to the repo root)
cache_dir = "outputs/runs"  # run cache; None trains afresh into a temporary folder
device = "auto"
threads = 0  # torch CPU threads; 0 keeps torch's default
progress = True
dim = 16
context_length = 64  # as notebook 03
key_dims = [4, 16]  # ranks of the query/key matrices: rank-limited and full rank (as notebook 03)
steps = 1000
batch_size = 64  # halved from notebook 03 to afford P x P attention
learning_rate = 0.01
init_scale = 1.0
eval_contexts = 1024
eval_points = 10
depths = [1, 2, 4, 8, 16, 32, 64]  # softmax and untied values: one attention row per layer, cheap
context_depths = [1, 2, 4, 8, 16, 32, 64]  # shared stream and context updates: P x P attention per layer
seeds = [0, 1]
spectra = [[0.0, 0.0]]  # [input_exponent, task_exponent]
wide_top_k = 16  # the broad target of C.3 (needs a context of at least 16 tokens)
reference_depth = 4  # "beyond moderate depth" means: compared with this depth
input_exponent = None  # set both (papermill -p) to run one custom spectrum instead of `spectra`
task_exponent = None
nb.end_of_parameters(globals())

# %%
s = nb.parameters(globals())
K = s["wide_top_k"]
_ = s.config(top_k=K)  # stops here if the context is too short for the broad target

# %% [markdown]
# ## Verdict criteria (written before the runs)
#
# "Seed spread" below is the combined standard error over seeds of the two mean losses compared;
# "falls beyond moderate depth" means the deepest model's mean loss is below that of the model at
# `reference_depth` (4 in the quick and paper profiles) by more than two seed spreads. Fits are `R_L = L0 + c L^-α` on the seed means, floor fitted jointly.
#
# **C7** (shared stream and untied values, top-2), for each model and spectrum:
# 1. the loss falls beyond moderate depth;
# 2. the fitted α lies within 0.35 of 1;
# 3. both decomposition terms level off: `A_L` and `C_L` change by less than 15 % over the last
#    doubling of depth.
#
# **C8** (context updates):
# 1. top-2 keeps an inverse-depth signal: its loss falls beyond moderate depth and its fitted α lies
#    within 0.35 of 1;
# 2. top-16 stops improving: its loss does not fall beyond moderate depth, or falls by less than 2 %;
# 3. the update scalar varies with depth for top-2: the mean of `u_l` over used layers spans more
#    than 0.5 across depths;
# 4. it stays near a constant for top-16: that span is at most 0.5 ...
# 5. ... and the constant is near the paper's −2.3: the mean over depths lies within 0.5 of it;
# 6. context attention: for the deepest model, top-2 puts at least 70 % of each token's attention on
#    itself (near the identity), top-16 at most 30 % (broad).
#
# A claim is **reproduced** when every check holds, **partly reproduced** when some do, **not
# reproduced** when none does. Each is judged at every rank in `key_dims` on that rank's sweeps;
# the overall status is reproduced when it is reproduced at every rank, not reproduced when it is
# not reproduced at any, and partly reproduced otherwise.

# %%
ALPHA_TOL, LEVEL_TOL, FLAT_GAIN = 0.35, 0.15, 0.02
U_SPAN, PAPER_U, U_TOL = 0.5, -2.3, 0.5
IDENTITY_MASS, BROAD_MASS = 0.7, 0.3
NAMES = {"softmax": "softmax (controlled)", "untied_values": "C.2 untied values",
         "shared_stream": "C.1 shared stream", "context_updates": "C.3 context updates"}

# %% [markdown]
# ## Runs
# Every sweep below trains all its depths in one batched pass per seed (and reads the run cache
# when it can). The controlled softmax model runs at the same settings, top-2 and top-16, as the
# reference each relaxation is compared with.

# %%
def sweep(model, depths, top_k, key_dim):
    return s.run(s.grid(depths, s["seeds"], s["spectra"], model=model, top_k=top_k, key_dim=key_dim))


key_dims = s["key_dims"]
SWEEPS = [("softmax", 2, s["depths"]), ("untied_values", 2, s["depths"]), ("shared_stream", 2, s["context_depths"]),
          ("context_updates", 2, s["context_depths"]), ("softmax", K, s["depths"]), ("context_updates", K, s["context_depths"])]
runs = {(m, k, kd): sweep(m, L, k, kd) for kd in key_dims for m, k, L in SWEEPS}
df = nb.losses_frame([r for rs in runs.values() for r in rs])
nb.save_table(s, df, "losses")
df.pivot_table(index=["key_dim", "model", "top_k", "input_exponent", "task_exponent"], columns="depth", values="loss")

# %% [markdown]
# What each sweep cost: wall-clock seconds per training step, evaluations included, for all depths
# of one seed in one pass, as recorded when the run was trained (so it depends on that machine's load).

# %%
timing = pd.DataFrame([{"model": m, "top_k": k, "key_dim": kd, "depths": f"{min(L)}–{max(L)}", "layers in the pass": sum(L),
                        "wall seconds per step": 1 / runs[(m, k, kd)][0]["steps_per_second"]}
                       for kd in key_dims for m, k, L in SWEEPS])
nb.save_table(s, timing, "timing")
timing

# %% [markdown]
# ## Training curves
# Every model must have reached its plateau before its final loss is compared across depths
# (hollow circles in the loss-versus-depth figures mark runs that had not).

# %%
for a, b in s["spectra"]:
    fig, axes = plt.subplots(2 * len(key_dims), 3, figsize=(12, 3.2 * 2 * len(key_dims)), sharey=True, layout="constrained")
    for ax, ((m, k, kd), rs) in zip(axes.flat, runs.items()):
        plots.training_curves(ax, runs_of(rs, (a, b)), f"{NAMES[m]}, top-{k}, key_dim {kd}")
        ax.legend(fontsize=6)
    fig.suptitle(plots.spectrum_label(a, b))
    curves_png = nb.save_figure(s, fig, f"training_curves_{a:g}_{b:g}")

# %% [markdown]
# ## Each relaxation against the controlled model
# One panel per relaxation: the generalised model (colour) and the controlled softmax model at the
# same settings (grey), with their fits, and the controlled model's bounds: the softmax bound
# (solid line), the mixture bound (dotted) and the random-subspace curve of the rank (dashed).

# %%
def part(model, k, kd, a, b):
    return df[(df.model == model) & (df.top_k == k) & (df.key_dim == kd) & (df.input_exponent == a) & (df.task_exponent == b)]


KEYS = [(m, k, kd, a, b) for kd in key_dims for m, k, _ in SWEEPS for a, b in s["spectra"]]
fits = {key: tables.fit_depths(part(*key)) for key in KEYS}
PANELS = [("shared_stream", 2), ("untied_values", 2), ("context_updates", 2), ("context_updates", K)]
ROWS = [(kd, a, b) for kd in key_dims for a, b in s["spectra"]]
# The bounds of the controlled model on each task and rank (icl.bounds, as in notebooks 03 and 06).
bnds = {(k, kd, a, b): bounds.bounds(s.config(top_k=k, key_dim=kd, input_exponent=a, task_exponent=b), s["depths"],
                                     cache=s.cache) for kd, a, b in ROWS for k in (2, K)}
fig, axes = plt.subplots(len(ROWS), 4, figsize=(16, 3.8 * len(ROWS)), squeeze=False, layout="constrained")
for row, (kd, a, b) in zip(axes, ROWS):
    for ax, (m, k) in zip(row, PANELS):
        plots.loss_vs_depth(ax, part("softmax", k, kd, a, b), f"softmax, top-{k}", "grey", fits[("softmax", k, kd, a, b)])
        plots.loss_vs_depth(ax, part(m, k, kd, a, b), f"{NAMES[m]}, top-{k}", plots.COLORS[0], fits[(m, k, kd, a, b)])
        plots.bounds_lines(ax, bnds[(k, kd, a, b)], color="grey", depths=s["depths"])
        ax.set_title(f"{NAMES[m]}, top-{k}, key_dim {kd}\n{plots.spectrum_label(a, b)}", fontsize=9)
        ax.legend(fontsize=7)
compare_png = nb.save_figure(s, fig, "loss_vs_depth")

# %% [markdown]
# ## C7: the decomposition terms of the shared stream and untied values
# `A_L` (the average error of one layer's predictor) and `C_L` (the error the layers share); the
# loss is `R_L = C_L + (A_L − C_L)/L`. The paper's picture: both approach constants, so the
# disagreement term `(A_L − C_L)/L` gives the depth gain and `C_L` sets the floor.

# %%
fig, axes = plt.subplots(len(key_dims), 2, figsize=(11, 3.8 * len(key_dims)), squeeze=False, layout="constrained")
for row, kd in zip(axes, key_dims):
    for i, (m, (a, b)) in enumerate([(m, sp) for m in ("softmax", "untied_values", "shared_stream") for sp in s["spectra"]]):
        for ax, term in zip(row, ("A_L", "C_L")):
            plots.loss_vs_depth(ax, part(m, 2, kd, a, b), f"{NAMES[m]} {plots.spectrum_label(a, b)}", plots.COLORS[i], value=term)
    for ax, term in zip(row, ("A_L: average individual error", "C_L: shared error")):
        ax.set(ylabel=term, title=f"key_dim {kd}")
axes[0, 0].legend(fontsize=7)
decomp_png = nb.save_figure(s, fig, "decomposition")

# %% [markdown]
# ## C8: what the context updates learn
# Left and middle: the learned `u_l` of every used layer (all but the last) for each depth, mean
# over seeds. Right: the mean over used layers against depth, for both targets, with the paper's
# −2.3 for reference.

# %%
ctx = {(k, kd): tables.context_update_table(runs[("context_updates", k, kd)]) for kd in key_dims for k in (2, K)}
fig, axes = plt.subplots(len(key_dims), 3, figsize=(14, 3.8 * len(key_dims)), squeeze=False, layout="constrained")
for row, kd in zip(axes, key_dims):
    for ax, k in zip(row, (2, K)):
        t = ctx[(k, kd)]
        for L, g in t[t.used].groupby(["depth", "layer"]).u.mean().reset_index().groupby("depth"):
            ax.plot(g.layer, g.u, "o-", ms=3, label=f"L = {L}")
        ax.set(title=f"top-{k}, key_dim {kd}", xlabel="layer l", ylabel="update scalar u_l")
        ax.legend(fontsize=7)
    for k, color in zip((2, K), plots.COLORS):
        t = ctx[(k, kd)]
        mean_u = t[t.used].groupby("depth").u.mean()
        row[2].plot(mean_u.index, mean_u.values, "o-", color=color, label=f"top-{k}")
    row[2].axhline(PAPER_U, color="grey", ls="--", lw=1, label="paper: −2.3")
    row[2].set(xlabel="depth L", ylabel="mean u_l over used layers", title=f"key_dim {kd}")
    row[2].set_xscale("log", base=2)
    row[2].legend(fontsize=7)
scalars_png = nb.save_figure(s, fig, "update_scalars")

# %% [markdown]
# The same per depth as numbers: the mean and the sum of `u_l` over used layers (the sum is the total
# context update a deep model applies), and the mean self-attention mass of those layers.

# %%
summary = pd.concat({f"top-{k}, key_dim {kd}": t[t.used].groupby(["depth", "seed"]).agg(
    mean_u=("u", "mean"), sum_u=("u", "sum"), self_mass=("self_mass", "mean")).groupby("depth").mean()
    for (k, kd), t in ctx.items()}, axis=1)
nb.save_table(s, summary.set_axis([" ".join(c) for c in summary.columns], axis=1).reset_index(), "context_updates")
summary.round(3)

# %% [markdown]
# Context-to-context attention: the mean attention a token pays to itself, per used layer, and one
# context's full attention matrix from the first layer of the deepest model (first seed).

# %%
deepest = max(s["context_depths"])
fig, axes = plt.subplots(len(key_dims), 4, figsize=(16, 3.8 * len(key_dims)), squeeze=False, layout="constrained")
for row, kd in zip(axes, key_dims):
    for ax, k in zip(row[:2], (2, K)):
        t = ctx[(k, kd)]
        for L, g in t[t.used].groupby(["depth", "layer"]).self_mass.mean().reset_index().groupby("depth"):
            ax.plot(g.layer, g.self_mass, "o-", ms=3, label=f"L = {L}")
        ax.set(title=f"top-{k}, key_dim {kd}: attention on self", xlabel="layer l", ylabel="mean self-attention mass",
               ylim=(0, 1.02))
        ax.legend(fontsize=7)
    for ax, k in zip(row[2:], (2, K)):
        r = next(r for r in runs[("context_updates", k, kd)] if r["config"]["depth"] == deepest)
        im = ax.imshow(np.array(r["parameters"]["context_attention_example"]), cmap="viridis", vmin=0)
        ax.set(title=f"top-{k}, key_dim {kd}, L = {deepest}, layer 1", xlabel="key token ν", ylabel="query token μ")
        ax.grid(False)
        fig.colorbar(im, ax=ax, shrink=0.8)
attention_png = nb.save_figure(s, fig, "context_attention")

# %% [markdown]
# ## Verdicts

# %%
def trend(model, k, kd, a, b):
    """The numbers every check reads, for one sweep."""
    p, f = part(model, k, kd, a, b), fits[(model, k, kd, a, b)]
    g = tables.gain_beyond(p, s["reference_depth"])
    out = {"alpha": f.alpha, "alpha_se": f.alpha_se, "L0": f.L0, "L0_se": f.L0_se, "c": f.c, "r2": f.r2,
           "R_ref": g["R_ref"], "R_deep": g["R_deep"], "rel_gain": g["rel_gain"], "spread": g["spread"],
           "falls": g["falls"], "converged": bool(p.converged.all())}
    if p.A_L.notna().any():
        out.update(A_change=tables.last_doubling_change(p, "A_L"), C_change=tables.last_doubling_change(p, "C_L"))
    return out


name = lambda m, k, kd, a, b: f"{m}/top{k}/key_dim {kd}/{a:g},{b:g}"
numbers = {name(*key): trend(*key) for key in KEYS}
numbers["seconds_per_step"] = {f"{m}/top{k}/key_dim {kd}": v for m, k, kd, v in
                               zip(timing.model, timing.top_k, timing.key_dim, timing["wall seconds per step"])}

# %%
c7 = {kd: {} for kd in key_dims}
for m, k, kd, a, b in KEYS:
    if m in ("shared_stream", "untied_values"):
        t = numbers[name(m, k, kd, a, b)]
        c7[kd][name(m, k, kd, a, b)] = {"falls": t["falls"], "alpha near 1": bool(abs(t["alpha"] - 1) <= ALPHA_TOL),
                                         "A, C level off": bool(max(t["A_change"], t["C_change"]) < LEVEL_TOL)}
flat = lambda checks: {f"{key}: {n}": v for key, cs in checks.items() for n, v in cs.items()}
keep = ("alpha", "alpha_se", "L0", "rel_gain", "spread", "A_change", "C_change", "converged")
regimes7 = {f"key_dim {kd}": {"status": claims.verdict(flat(c7[kd])),
                              "measured": {key: {n: numbers[key][n] for n in keep} for key in c7[kd]}} for kd in key_dims}
claims.claim_by_regime(s, "C7", "Shared stream (C.1) and untied values (C.2) keep an approximate inverse-depth trend "
                       "beyond moderate depth, with both decomposition terms approaching constants.", regimes7, compare_png,
                       f"loss at the deepest < loss at depth {s['reference_depth']} by > 2 seed spreads; |alpha - 1| <= "
                       f"{ALPHA_TOL}; A_L and C_L change < {LEVEL_TOL:.0%} over the last doubling of depth")
c7

# %%
a0, b0 = s["spectra"][0]
used_u = lambda t: t[t.used].groupby("depth").u.mean()
c8, measured8 = {}, {}
for kd in key_dims:
    top2, wide = numbers[name("context_updates", 2, kd, a0, b0)], numbers[name("context_updates", K, kd, a0, b0)]
    u_span = {k: tables.spread_across_depths(ctx[(k, kd)]) for k in (2, K)}
    u_mean = {k: float(used_u(ctx[(k, kd)]).mean()) for k in (2, K)}
    self_mass = {k: float(ctx[(k, kd)][ctx[(k, kd)].used & (ctx[(k, kd)].depth == deepest)].self_mass.mean()) for k in (2, K)}
    c8[kd] = {"top-2 inverse-depth signal": bool(top2["falls"] and abs(top2["alpha"] - 1) <= ALPHA_TOL),
              f"top-{K} stops improving": bool(not wide["falls"] or wide["rel_gain"] < FLAT_GAIN),
              "top-2 u varies with depth": bool(u_span[2] > U_SPAN),
              f"top-{K} u constant": bool(u_span[K] <= U_SPAN),
              f"top-{K} u near -2.3": bool(abs(u_mean[K] - PAPER_U) <= U_TOL),
              f"attention: top-2 identity, top-{K} broad": bool(self_mass[2] >= IDENTITY_MASS and self_mass[K] <= BROAD_MASS)}
    measured8[kd] = {"top2 alpha": top2["alpha"], "top2 alpha_se": top2["alpha_se"], "top2 rel_gain": top2["rel_gain"],
                     f"top{K} rel_gain": wide["rel_gain"], f"top{K} spread": wide["spread"], "u span": u_span,
                     "u mean": u_mean, "self mass": self_mass, "converged": bool(top2["converged"] and wide["converged"])}
regimes8 = {f"key_dim {kd}": {"status": claims.verdict(c8[kd]), "measured": {**measured8[kd], **c8[kd]}} for kd in key_dims}
claims.claim_by_regime(s, "C8", f"With context updates (C.3) top-2 keeps an inverse-depth signal while top-{K} stops "
                       f"improving; the update scalar varies with depth for top-2 and stays near -2.3 for top-{K}; top-2 "
                       f"context attention is nearly the identity, top-{K} broad.", regimes8, compare_png,
                       f"top-2 falls beyond depth {s['reference_depth']} with |alpha - 1| <= {ALPHA_TOL}; top-{K} does not "
                       f"fall (or < {FLAT_GAIN:.0%}); u span > {U_SPAN} (top-2), <= {U_SPAN} (top-{K}); top-{K} mean u within "
                       f"{U_TOL} of {PAPER_U}; self-attention mass >= {IDENTITY_MASS} (top-2), <= {BROAD_MASS} (top-{K})")
numbers.update(c7_checks=c7, c8_checks=c8, c8_measured=measured8)
nb.write_results(s, numbers)
c8

# %% [markdown]
# ## Reading the results (quick profile)
#
# These remarks describe the committed `quick` run (d = 16, P = 64, depths 1–64 for every model,
# 1,000 steps, two seeds, key_dim 4 and 16); the verdicts above are the checks as written before it.
#
# - **Rank-limited (key_dim 4): every relaxation keeps a depth gain.** From depth 4 to 64 the
#   controlled model loses 25 % (0.577 → 0.430), untied values the same (0.574 → 0.429: with scalar
#   labels a per-layer value is a per-layer weight, and training leaves them nearly equal), the
#   shared stream 25 % (0.601 → 0.453, above the controlled model at every depth, its deep runs
#   still falling) and context updates 21 % (0.515 → 0.407). The fitted exponents are 0.6–0.8, not
#   1: as in notebook 03 at this rank, the curves bend onto a floor. Top-16 with context updates
#   gains 16 % beyond depth 4 (0.163 → 0.137) while the controlled top-16 model gains 38 %
#   (0.242 → 0.151): the paper's contrast appears, but "stops improving" (2 %) does not.
# - **Full rank (key_dim 16): no model gains from depth.** Every model ends 7–20 % *higher* at depth
#   64 than at depth 4 (the controlled model 0.194 → 0.211, the shared stream 0.214 → 0.241), and
#   most deep runs were still moving at the end of training (flagged not at their plateau): at this
#   notebook's small budget (1,000 steps, batch 64, rate 0.01) the deep full-rank models are
#   under-trained. Notebooks 03 and 06 train the controlled model at full rank with 2,000 steps,
#   batch 256 and rate 0.003, and find it flat on the softmax bound; so the rise here is a training
#   limit, while the absence of a gain agrees with them.
# - **Context updates can beat the controlled model's bound.** With top-16 at full rank the
#   context-update model reaches 0.124 at depths 2–4, below the softmax bound of 0.133 for top-16
#   (and the mixture bound): rewriting the context labels before they are read is not an isotropic
#   softmax of fixed labels, so the bound of notebooks 03 and 06 does not bind this model.
# - **The update scalars** do not behave as the paper reports. The per-layer `u_l` shrink with depth
#   while their *sum* stays between −1.2 and −1.8 (key_dim 4) from depth 4 on, for top-2 and top-16
#   alike: the models learn a total context update spread over the layers, not a constant near
#   −2.3 per layer. If the paper's scalar multiplies a 1/L-scaled update (its full text is not
#   available to us), its constant corresponds to our sum, at about two thirds of the paper's
#   magnitude at most.
# - **Context attention.** At key_dim 4 it is sharper for top-2 than for top-16 (self-attention mass
#   0.24 against 0.18 at depth 64), but top-2 is far from the identity. At full rank top-2 context
#   attention is nearly the identity in shallow models (0.99 of the mass on the token itself at
#   depths 2–8, 0.76 at depth 64) and top-16 is broad (0.24–0.30), as the paper describes; its
#   scalars are small (sums −0.3 to −0.8).

# %%
# NBVAL_CHECK_OUTPUT
nb.show({f"{key} R(ref), R(deepest)": [t["R_ref"], t["R_deep"]] for key, t in numbers.items() if "R_ref" in t})
nb.show({f"key_dim {kd}": {n: measured8[kd][n] for n in ("u span", "u mean", "self mass")} for kd in key_dims})
claims.show_claims(s)
