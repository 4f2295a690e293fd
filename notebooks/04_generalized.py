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
# (`icl.core.accel`) that take one (model, context) pair through all its layers with its states in
# cache and recompute attention in the backward pass instead of storing it; `icl bench` measures
# them against their first implementation (README, "Speed"). The `quick` profile trains at P = 64
# with batches of 128 and 1,000 steps, below the paper's budget (batches of 64 left C7's and C8's
# deepest runs still falling; doubling the batch brought them to their plateau: docs/history.md);
# runs that have not reached their plateau are flagged. The `paper` profile widens all of these on a GPU. What a run costs is not
# printed here (it changes from one run to the next with the machine's load): `make bench` measures
# seconds per step (`outputs/studies/bench.md`) and `make reproduce` records each notebook's wall time in
# `outputs/timings.json`.
#
# **Depths.** The controlled model and untied values (one attention row per layer) run at `depths`
# (1–64 in `quick`) at every rank, and so do the shared stream and context updates at the
# rank-limited `key_dim` (`context_depths`). At full rank those two run at
# `full_rank_context_depths` only (1–16 in `quick`). Why: at full rank the controlled model is flat
# on the softmax bound (notebooks 03 and 06), and the deep full-rank runs of these two models are
# the most expensive of the repository (the kernel's score and feature loops grow with the rank;
# README, "How long it takes"), yet decide nothing that depths up to 16 do not: C7 and C8 compare
# the deepest depth with `reference_depth` (4), C7 reads the last doubling of depth (8 to 16), and
# the shorter grid has both.
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

from icl import bounds, estimates, exponents, grids, plots, runs_of, show_claims, tables
from icl import notebook as nb
from icl.claims import PLATEAU, at_plateau
from icl.claims import generalised as rules

plots.style()

# %% tags=["parameters"]
profile = "quick"  # which params/<profile>/ file these values came from (informational)
output_dir = "outputs/scratch/04_generalized"  # a run by hand (git-ignored); icl reproduce: outputs/<profile>/
cache_dir = "outputs/runs"  # run cache; None trains afresh, keeping nothing on disk
device = "auto"
threads = 0  # torch CPU threads; 0 keeps torch's default
progress = True
dim = 16
context_length = 64  # as notebook 03
key_dims = [4]  # ranks of the query/key matrices; the paper profile adds full rank (why not here: params/quick/)
steps = 1000
batch_size = 128  # half of notebook 03's, to afford P x P attention (64 left deep runs falling: docs/history.md)
learning_rate = 0.01
init_scale = 1.0
eval_contexts = 1024
fit_contexts = 2048  # contexts that icl.bounds fits its temperatures and readouts on
eval_points = 10
depths = [1, 2, 4, 8, 16, 32, 64]  # softmax and untied values: one attention row per layer, cheap
context_depths = [1, 2, 4, 8, 16, 32, 64]  # shared stream and context updates: P x P attention per layer
full_rank_context_depths = [1, 2, 4, 8, 16]  # the same two at full rank (key_dim equal to dim): see the Depths paragraph
seeds = [0, 1, 2]
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
# "Falls beyond moderate depth" means the deepest model's mean loss is below that of the model at
# `reference_depth` (4 in the quick and paper profiles): the ratio R_deepest / R_ref is below 1.
# Fits are the protocol fit of notebook 03: R_L = L0 + c·L^(−α) by least squares on log R_L, on the
# seed means of every depth, unweighted, the floor fitted jointly and held to 0 ≤ L0 ≤ min_L R_L.
#
# **How sure a number is.** Every number a check reads (the ratio R_deepest / R_ref, α, the
# changes of A_L and C_L, the span and mean of the update scalars, the self-attention mass) comes
# with its 95 % interval over seeds (`icl.intervals`: jackknife, Student's t; the depths of one seed
# share their data stream and leave together). A check *holds* when the whole interval lies on
# its side of the threshold, *fails* when the whole interval lies on the other side, and is
# *inconclusive* otherwise; a claim whose status inconclusive checks leave open is *inconclusive*,
# with the range it lies in. *(The only change since these criteria were first written: "falls
# beyond moderate depth" was "below R_ref by more than two seed spreads", the combined standard
# error of the two means; the interval of the ratio now says how sure the fall is, as every other
# number's interval does. The thresholds are unchanged; they live in `icl.claims.generalised`.)*
#
# **The exponent rule** (since the third rerun; docs/history.md): α is the primary model's of
# notebook 03 (one power law over every depth where its χ² test passes, else the tail L ≥ m,
# m = lcm(d, k)/k), with its interval over seeds; an α the primary fit does not identify leaves
# the check inconclusive (`icl.exponents`). Since the fourth rerun its power law is tested first
# against an exponential approach and a log-corrected 1/L, and refitted from twice its first depth
# (notebook 03's criteria say how).
#
# **C7** (shared stream and untied values, top-2), for each model and spectrum:
# 1. the loss falls beyond moderate depth;
# 2. the fitted α lies within `ALPHA_TOL` of 1 (1 and 2 together: the **core**, inverse-depth decay in
#    every sweep);
# 3. both decomposition terms level off: `A_L` and `C_L` change by less than `LEVEL_TOL` over the last
#    doubling of depth.
#
# **C8** (context updates):
# 1. top-2 keeps an inverse-depth signal: its loss falls beyond moderate depth and its fitted α lies
#    within `ALPHA_TOL` of 1 (the **core**);
# 2. top-16 stops improving: its loss does not fall beyond moderate depth, or falls by less than
#    `FLAT_GAIN` (R_deepest / R_ref > 1 − `FLAT_GAIN`, which contains "does not fall at all");
# 3. the update scalar varies with depth for top-2: the mean of `u_l` over used layers spans more
#    than `U_SPAN` across depths;
# 4. it stays near a constant for top-16: that span is at most `U_SPAN` ...
# 5. ... and the constant is near the paper's −2.3 (`PAPER_U`): the mean over depths lies within
#    `U_TOL` of it;
# 6. context attention: for the deepest model, top-2 puts at least `IDENTITY_MASS` of each token's
#    attention on itself (near the identity), top-16 at most `BROAD_MASS` (broad).
#
# A claim is **not reproduced** when its core check fails, **reproduced** when the core and every
# other check hold, **partly reproduced** when the core holds and another check does not,
# **inconclusive** when the core is (before the second rerun: reproduced when every check held,
# partly when some did, not when none did). Each is judged at every rank in `key_dims` on that rank's sweeps;
# the overall status is reproduced when it is reproduced at every rank, not reproduced when it is
# not reproduced at any, and partly reproduced otherwise. The thresholds live in
# `icl.claims.generalised`, the one place they are set; from there:

# %%
rules.show_criteria(s.params)

# %%
NAMES = {"softmax": "softmax (controlled)", "untied_values": "C.2 untied values",
         "shared_stream": "C.1 shared stream", "context_updates": "C.3 context updates"}

# %% [markdown]
# ## Runs
# Every sweep below trains all its depths in one batched pass per seed (and reads the run cache
# when it can). The controlled softmax model runs at the same settings, top-2 and top-16, as the
# reference each relaxation is compared with.

# %%
key_dims = s["key_dims"]
SWEEPS = [(m, K if k == "wide" else k) for m, k in grids.GENERALISED_SWEEPS]
runs_cfg = grids.generalized(s.params)
# (model, top_k, key_dim): icl.grids.generalized
runs = {key: s.run(cfgs) for key, cfgs in runs_cfg.items()}
df = tables.losses_frame([r for rs in runs.values() for r in rs])
nb.save_table(s, df, "losses")
df.pivot_table(
    index=["key_dim", "model", "top_k", "input_exponent", "task_exponent"],
    columns="depth",
    values="loss",
)

# %% [markdown]
# ## Training curves
# Every model must have reached its plateau before its final loss is compared across depths
# (hollow circles in the loss-versus-depth figures mark runs that had not).

# %%
for a, b in s["spectra"]:
    fig, axes = plt.subplots(
        2 * len(key_dims),
        3,
        figsize=(12, 3.2 * 2 * len(key_dims)),
        sharey=True,
        layout="constrained",
    )
    for ax, ((m, k, kd), rs) in zip(axes.flat, runs.items()):
        plots.training_curves(ax, runs_of(rs, (a, b)), f"{NAMES[m]}, top-{k}, key_dim {kd}")
        plots.legend(ax)
    fig.suptitle(plots.spectrum_label(a, b))
    curves_png = nb.save_figure(
        s, fig, f"training_curves_{a:g}_{b:g}",
        "Evaluation loss against training step for every generalised model, target and rank on this spectrum.",
    )

# %% [markdown]
# ## Each relaxation against the controlled model
# One panel per relaxation: the generalised model (colour) and the controlled softmax model at the
# same settings (grey), each with the fit its verdict reads (the exponent rule's primary model, its
# alpha in the title), a 1/L tail through the model's floor (dashed black), and the controlled
# model's bounds: the softmax bound (solid line), the mixture bound (dotted) and the random-subspace
# curve of the rank (dashed).

# %%
SWEEP_KEYS = ["model", "top_k", "key_dim", *tables.SPECTRUM]
KEYS = [(m, k, kd, a, b) for kd in key_dims for m, k in SWEEPS for a, b in s["spectra"]]
sweep = {key: tables.part_of(df, **dict(zip(SWEEP_KEYS, key))) for key in KEYS}  # one sweep's runs
PANELS = [
    ("shared_stream", 2),
    ("untied_values", 2),
    ("context_updates", 2),
    ("context_updates", K),
]
ROWS = [(kd, a, b) for kd in key_dims for a, b in s["spectra"]]
# The bounds of the controlled model on each task and rank (icl.bounds, as in notebooks 03 and 06).
bnds = {
    (k, kd, a, b): bounds.bounds(
        s.config(top_k=k, key_dim=kd, input_exponent=a, task_exponent=b),
        s["depths"],
        s["fit_contexts"],
        cache=s.cache,
    )
    for kd, a, b in ROWS
    for k in (2, K)
}
fig, axes = plt.subplots(
    2 * len(ROWS), 2, figsize=(9, 7.8 * len(ROWS)), squeeze=False, layout="constrained"
)
axes = axes.reshape(len(ROWS), 4)  # each row's four panels as a 2 x 2 block
for row, (kd, a, b) in zip(axes, ROWS):
    for ax, (m, k) in zip(row, PANELS):
        soft, model = sweep[("softmax", k, kd, a, b)], sweep[(m, k, kd, a, b)]
        plots.loss_vs_depth(ax, soft, "softmax, same top-k (mean ± s.e. over seeds)", "grey")
        plots.loss_vs_depth(ax, model, "the panel's model (mean ± s.e. over seeds)", plots.TRAINED, shift=0.05)
        # each with the fit its verdict reads; the model with a 1/L tail through the same floor
        soft_alpha = plots.verdict_fit(ax, soft, s["dim"], kd, "grey", "softmax: fit a verdict reads", reference=False)
        model_alpha = plots.verdict_fit(ax, model, s["dim"], kd, plots.TRAINED, "model: fit a verdict reads")
        plots.bounds_lines(ax, bnds[(k, kd, a, b)], depths=s["depths"])
        ax.set_title(
            f"{NAMES[m]}, top-{k}, key_dim {kd}, {plots.spectrum_label(a, b)}\n"
            f"softmax {plots.alpha_text(soft_alpha)}\nmodel {plots.alpha_text(model_alpha)}",
            fontsize=9,
        )
        ax.set_ylabel("relative loss $R_L$")
plots.figure_legend(fig)  # one legend for every panel, below them, off the curves
compare_png = nb.save_figure(
    s, fig, "loss_vs_depth",
    "Each generalised model's loss against depth beside the controlled softmax model at the same settings, with the fits"
    " the verdicts read, a 1/L tail and the controlled model's bounds.",
)

# %% [markdown]
# ## C7: the decomposition terms of the shared stream and untied values
# `A_L` (the average error of one layer's predictor) and `C_L` (the error the layers share); the
# loss is `R_L = C_L + (A_L − C_L)/L`. The paper's picture: both approach constants, so the
# disagreement term `(A_L − C_L)/L` gives the depth gain and `C_L` sets the floor.

# %%
fig, axes = plt.subplots(
    len(key_dims), 2, figsize=(11, 3.8 * len(key_dims)), squeeze=False, layout="constrained"
)
for row, kd in zip(axes, key_dims):
    for i, (m, (a, b)) in enumerate(
        [(m, sp) for m in ("softmax", "untied_values", "shared_stream") for sp in s["spectra"]]
    ):
        for ax, term in zip(row, ("A_L", "C_L")):
            plots.loss_vs_depth(
                ax,
                sweep[(m, 2, kd, a, b)],
                f"{NAMES[m]} {plots.spectrum_label(a, b)}",
                plots.COLORS[i],
                value=term,
            )
    for ax, term in zip(row, ("$A_L$: average individual error", "$C_L$: shared error")):
        ax.set(ylabel=term, title=f"key_dim {kd}")
plots.legend(axes[0, 0])
decomp_png = nb.save_figure(
    s, fig, "decomposition",
    "The decomposition terms A_L and C_L of the shared-stream and untied-value models against depth (C7).",
)

# %% [markdown]
# ## C8: what the context updates learn
# Left and middle: the learned `u_l` of every used layer (all but the last) for each depth, mean
# over seeds. Right: the mean over used layers against depth, for both targets, with the paper's
# −2.3 for reference.

# %%
ctx = {
    (k, kd): tables.context_update_table(runs[("context_updates", k, kd)])
    for kd in key_dims
    for k in (2, K)
}
fig, axes = plt.subplots(
    2 * len(key_dims), 2, figsize=(9, 7.2 * len(key_dims)), squeeze=False, layout="constrained"
)
axes = axes.reshape(len(key_dims), 4)  # each rank's three panels in a 2 x 2 block
for row in axes:
    row[3].set_visible(False)
for row, kd in zip(axes, key_dims):
    for ax, k in zip(row, (2, K)):
        t = ctx[(k, kd)]
        for L, g in t[t.used].groupby(["depth", "layer"]).u.mean().reset_index().groupby("depth"):
            ax.plot(g.layer, g.u, "o-", ms=3, label=f"L = {L}")
        ax.set(title=f"top-{k}, key_dim {kd}", xlabel="layer l", ylabel="update scalar u_l")
        plots.legend(ax)
    for k, color in zip((2, K), plots.COLORS):
        t = ctx[(k, kd)]
        mean_u = t[t.used].groupby("depth").u.mean()
        row[2].plot(mean_u.index, mean_u.values, "o-", color=color, label=f"top-{k}")
    row[2].axhline(rules.PAPER_U, color="grey", ls="--", lw=1, label="paper: −2.3")
    row[2].set(xlabel="depth $L$", ylabel="mean u_l over used layers", title=f"key_dim {kd}")
    plots.depth_axis(row[2])
    plots.legend(row[2])
scalars_png = nb.save_figure(
    s, fig, "update_scalars",
    "The learned context-update scalars u_l per layer and depth, and their mean against depth beside the paper's -2.3 (C8).",
)

# %% [markdown]
# The same per depth as numbers: the mean and the sum of `u_l` over used layers (the sum is the total
# context update a deep model applies), and the mean self-attention mass of those layers.

# %%
summary = pd.concat(
    {
        f"top-{k}, key_dim {kd}": t[t.used]
        .groupby(["depth", "seed"])
        .agg(mean_u=("u", "mean"), sum_u=("u", "sum"), self_mass=("self_mass", "mean"))
        .groupby("depth")
        .mean()
        for (k, kd), t in ctx.items()
    },
    axis=1,
)
nb.save_table(
    s,
    summary.set_axis([" ".join(c) for c in summary.columns], axis=1).reset_index(),
    "context_updates",
)
summary.round(3)

# %% [markdown]
# Context-to-context attention: the mean attention a token pays to itself, per used layer, and one
# context's full attention matrix from the first layer of the deepest model (first seed).

# %%
fig, axes = plt.subplots(
    2 * len(key_dims), 2, figsize=(9, 7.2 * len(key_dims)), squeeze=False, layout="constrained"
)
axes = axes.reshape(len(key_dims), 4)  # each rank's four panels as a 2 x 2 block
for row, kd in zip(axes, key_dims):
    for ax, k in zip(row[:2], (2, K)):
        t = ctx[(k, kd)]
        for L, g in (
            t[t.used].groupby(["depth", "layer"]).self_mass.mean().reset_index().groupby("depth")
        ):
            ax.plot(g.layer, g.self_mass, "o-", ms=3, label=f"L = {L}")
        ax.set(
            title=f"top-{k}, key_dim {kd}: attention on self",
            xlabel="layer l",
            ylabel="mean self-attention mass",
            ylim=(0, 1.02),
        )
        plots.legend(ax)
    for ax, k in zip(row[2:], (2, K)):
        deepest = max(c.depth for c in runs_cfg[("context_updates", k, kd)])
        r = next(r for r in runs[("context_updates", k, kd)] if r["config"]["depth"] == deepest)
        im = ax.imshow(
            np.array(r["parameters"]["context_attention_example"]), cmap="viridis", vmin=0
        )
        ax.set(
            title=f"top-{k}, key_dim {kd}, L = {deepest}, layer 1",
            xlabel="key token ν",
            ylabel="query token μ",
        )
        ax.grid(False)
        fig.colorbar(im, ax=ax, shrink=0.8)
attention_png = nb.save_figure(
    s, fig, "context_attention",
    "Context-to-context attention: the mean attention a token pays to itself per layer, and one context's first-layer attention matrix.",
)

# %% [markdown]
# ## Verdicts
# Per sweep, with intervals over seeds: the protocol fit (α), R_deepest / R_ref and, where the model
# has a decomposition, the changes of A_L and C_L over the last doubling; per context-update sweep,
# the span and mean of the update scalars and the deepest model's self-attention mass.

# %%
SWEEP = ["key_dim", "model", "top_k", *tables.SPECTRUM]
trend = estimates.estimate_table(df, SWEEP).merge(
    estimates.per_sweep(df, SWEEP, estimates.depth_trend, ref_depth=s["reference_depth"]),
    on=[*SWEEP, "n_seeds"],
)
trend = exponents.exponent_fits(trend, df, SWEEP, s["dim"])
trend["softmax_bound"] = [
    bnds[(r.top_k, r.key_dim, r.input_exponent, r.task_exponent)]["single"]
    for r in trend.itertuples()
]
scalars = estimates.per_sweep(
    pd.concat([t.assign(key_dim=kd) for (k, kd), t in ctx.items()]),
    ["key_dim", "top_k"],
    estimates.context_update_estimates,
)
nb.save_table(s, trend, "sweeps")
nb.save_table(s, scalars, "update_scalar_estimates")
trend[
    [
        *SWEEP, "n_seeds", "deepest", *exponents.COLUMNS,
        "fall_beyond", "fall_beyond_lo95", "fall_beyond_hi95", "A_change", "C_change",
    ]
].round(3)

# %%
a0, b0 = s["spectra"][0]  # C8 is judged on the first spectrum
rows, units = trend.set_index(SWEEP, drop=False), scalars.set_index(
    ["key_dim", "top_k"], drop=False
)
# claim -> "key_dim k" -> checks, numbers
checks, shown = {"C7": {}, "C8": {}}, {"C7": {}, "C8": {}}
for kd in key_dims:
    c7_sweeps = trend[(trend.key_dim == kd) & trend.model.isin(["shared_stream", "untied_values"])]
    c8_rows = [rows.loc[(kd, "context_updates", k, a0, b0), :] for k in (2, K)] + [
        units.loc[(kd, k), :] for k in (2, K)
    ]
    # the runs each core reads: C7 every sweep of the two models, C8 the top-2 context updates
    c7_runs = df[(df.key_dim == kd) & df.model.isin(["shared_stream", "untied_values"])]
    c8_runs = tables.part_of(df, key_dim=kd, model="context_updates", top_k=2, input_exponent=a0, task_exponent=b0)
    checks["C7"][f"key_dim {kd}"] = {**rules.c7(c7_sweeps), PLATEAU: at_plateau(c7_runs)}
    checks["C8"][f"key_dim {kd}"] = {**rules.c8(*c8_rows), PLATEAU: at_plateau(c8_runs)}
    shown["C7"][f"key_dim {kd}"], shown["C8"][f"key_dim {kd}"] = (
        rules.c7_numbers(c7_sweeps), rules.c8_numbers(*c8_rows)
    )
rules.record_by_regime(s.params, "C7", checks["C7"], shown["C7"], compare_png)
rules.record_by_regime(s.params, "C8", checks["C8"], shown["C8"], scalars_png)
nb.write_results(
    s,
    {
        "sweeps": trend.to_dict("records"),
        "update_scalars": scalars.to_dict("records"),
        "checks": checks,
    },
)
{c["id"]: {k: r["status"] for k, r in c["regimes"].items()} for c in s.claims}

# %% [markdown]
# ## Reading the results
#
# What to look for, rank by rank. At the rank-limited `key_dim`: whether every relaxation keeps the
# controlled model's depth gain beyond `reference_depth` (a ratio R_deepest / R_ref whose interval
# lies below 1), whether its exponent is near 1 or, as in notebook 03 at this rank, lower because
# the curve bends onto a floor, and whether top-16 with context updates stops improving or merely
# improves less than the controlled top-16 model. At full rank: whether any model gains from depth
# at all (notebooks 03 and 06 find the controlled model flat on the softmax bound there); a deep
# model that ends *above* a shallow one and is flagged as still falling points at this notebook's
# small training budget, not at depth. Whether the context-update model gets below the controlled
# model's softmax bound: rewriting the context labels before they are read is not an isotropic
# softmax of fixed labels, so that bound need not bind it. For the update scalars: whether the
# per-layer u_l shrink with depth while their sum stays put (a total context update spread over the
# layers, which would correspond to the paper's constant if its scalar multiplies a 1/L-scaled
# update; its full text is not available to us), and whether the context attention of top-2 is
# near the identity and that of top-16 broad. From this run:

# %%
for r in trend.itertuples():
    lowest = (
        sweep[(r.model, r.top_k, r.key_dim, r.input_exponent, r.task_exponent)]
        .groupby("depth")
        .loss.mean()
        .min()
    )
    print(
        f"key_dim {r.key_dim}, {NAMES[r.model]}, top-{r.top_k}: R_{r.deepest} / R_{s['reference_depth']} "
        f"{estimates.interval_text(estimates.estimate(trend.loc[r.Index], 'fall_beyond'))}; "
        f"{exponents.describe(trend.loc[r.Index])}"
        + ("; below the controlled model's softmax bound" if lowest < r.softmax_bound else "")
    )
for (k, kd), t in ctx.items():
    u, sums = (
        units.loc[(kd, k), :],
        t[t.used].groupby(["depth", "seed"]).u.sum().groupby("depth").mean(),
    )
    print(
        f"key_dim {kd}, top-{k}: mean u_l {estimates.interval_text(estimates.estimate(u, 'u_mean'))}, span across depths "
        f"{estimates.interval_text(estimates.estimate(u, 'u_span'))}, sum over used layers {sums.min():.2f} to "
        f"{sums.max():.2f}; self-attention at depth {max(c.depth for c in runs_cfg[('context_updates', k, kd)])} "
        f"{estimates.interval_text(estimates.estimate(u, 'self_mass'))}"
    )

# %% [markdown]
# The regression check prints the seed-mean losses at one layer and at the deepest depth of every
# sweep, the update scalars' summaries, and the verdicts; the fitted exponents are not printed here
# at the `ci` profile's scale, where most fits are ill-conditioned.

# %%
# NBVAL_CHECK_OUTPUT
nb.show(
    {
        f"key_dim {r.key_dim}, {r.model}, top-{r.top_k}, ({r.input_exponent:g}, {r.task_exponent:g}): R_1, R_deepest": [
            r.R_1,
            r.R_deepest,
        ]
        for r in trend.itertuples()
    },
    digits=2,
)
nb.show(
    {
        f"key_dim {r.key_dim}, top-{r.top_k}": {
            "u span": r.u_span,
            "u mean": r.u_mean,
            "self mass": r.self_mass,
        }
        for r in scalars.itertuples()
    },
    digits=2,
)
show_claims(s.params)
