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
# # Difficult task: linear against softmax attention (paper §4, A.3, B, D.2, D.3)
#
# **Question.** On the difficult task the target is the mean label of the k context tokens most
# similar (in cosine) to a fresh query. Nothing copies the answer: the model has to find several
# tokens and average them. Linear attention can only weight tokens by a linear function of their
# inputs, so it should settle on a floor within a layer or two. Does a stack of *softmax* layers
# keep improving with depth, and if so, does the loss fall roughly as 1/L towards a floor that is
# well below the linear one? And what is the depth buying: do the layers act like an ensemble whose
# shared error sets the floor while their disagreements average away?
#
# **Setup.** The controlled models (paper §2): fixed context labels, layers with their own query and
# key matrices of rank `key_dim`, one shared value, prediction = mean of the layers' attention-read
# labels (softmax); and the linear model with context updates (L steps of in-context gradient
# descent) with full-rank preconditioners Γ_l = Q_lᵀK_l, as in its theory (A.1). Inputs lie on
# the sphere of radius √d (our choice, see notebook 02). Every depth of a sweep trains in one
# batched pass on the same data stream; the run cache makes re-runs free. Steps, learning rate and
# initialisation follow `docs/training_protocol.md`.
#
# **The rank axis.** The paper's summary does not give the rank d_k = `key_dim` of the query/key
# matrices, and it decides the answer (notebooks 06 and 07). So every softmax sweep here runs at
# each `key_dim` in `key_dims` (4, 8 and 12 are rank-limited at d = 16; 16 is full rank), and
# C4, C5, C9 and C10 are judged at every rank. Each sweep is drawn with the reference predictors of
# `icl.bounds`: the softmax bound (the best isotropic softmax of the cosine, which one full-rank
# layer can represent), the mixture bound (the best ensemble of such layers), and the untrained
# ensembles of random and of complementary subspaces of the same rank (`icl.baselines`).
#
# Claims judged here: C3 (linear plateau), C4 (softmax ≈ 1/L), C5 (ensemble decomposition),
# C6b (mode-wise learning, softmax half of C6), C9 (token selection), C10 (other spectra, top-16).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from icl import (
    bounds, estimates, exponents, grids, modes, plots, runs_of, show_claims, tables, theory,
)
from icl import notebook as nb
from icl.claims import PLATEAU, at_plateau
from icl.claims import difficult as rules

plots.style()

# %% tags=["parameters"]
profile = "quick"  # which params/<profile>/ file these values came from (informational)
output_dir = "outputs/scratch/03_difficult"  # a run by hand (git-ignored); icl reproduce: outputs/<profile>/
cache_dir = "outputs/runs"  # run cache; None trains afresh, keeping nothing on disk
device = "auto"
threads = 0  # torch CPU threads; 0 keeps torch's default
progress = True
dim = 16
context_length = 64
key_dims = [4, 8, 12, 16]  # ranks of the query/key matrices of every softmax sweep (16 is full rank here)
steps = 2000
batch_size = 256
learning_rate = 0.003
init_scale = 1.0
eval_contexts = 16384  # the evaluation set every loss and bound is scored on (docs/training_protocol.md, §8)
curve_contexts = 2048  # its first contexts measure the loss along training
top_k = 2  # the main task: mean label of the top-2 tokens
depths = [1, 2, 3, 4, 6, 8, 12, 16, 32, 64]  # softmax depths of the main sweep: densest where the curves bend
seeds = [0, 1, 2, 3, 4]  # seeds of every main sweep (softmax and linear)
spectra = [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]  # [input_exponent, task_exponent]; the first one is
# also used for the rank comparison and the token-selection percentiles
linear_depths = [1, 2, 3, 4, 6, 8]
linear_learning_rate = 0.003
linear_key_dim = 0  # rank of the linear model's Q, K; 0 means full rank, the preconditioners of A.1
mode_spectrum = [1.0, 0.0]  # spectrum of the mode-wise curves (C6b, at the first key_dim); the first spectrum if not in `spectra`
mode_eval_points = 100  # evaluations along training for that spectrum (modes are learned early)
joint_spectra = [[1.0, 1.0], [1.5, 0.5]]  # both exponents nonzero (C10)
wide_top_k = 16  # the flatter aggregation task of C10
wide_spectra = [[0.0, 0.0], [1.0, 1.0]]
extra_depths = [1, 2, 4, 8, 16, 32]  # depths of the joint-spectrum and wide-top-k sweeps
extra_seeds = [0, 1, 2]  # their seeds (fewer than the main sweeps': the budget goes to the headline claims)
mc_contexts = 20000  # contexts of the Monte Carlo linear floor (A.3)
fit_contexts = 2048  # contexts that icl.bounds fits its temperatures and readouts on
input_exponent = None  # set both (papermill -p) to run one custom spectrum instead of `spectra`
task_exponent = None
nb.end_of_parameters(globals())

# %%
s = nb.parameters(globals())
first = s["spectra"][0]
mode_spectrum = s["mode_spectrum"] if s["mode_spectrum"] in s["spectra"] else first
# C6b and the mode-wise probes use the first rank
key_dims, primary = s["key_dims"], s["key_dims"][0]

# %% [markdown]
# ## Verdict criteria (written before the runs)
#
# Loss means the relative loss R_L = E[(ŷ − y*)²] / E[y*²] on the held-out contexts. **The fit**
# (§D.1) is R_L = L0 + c·L^(−α) by least squares on log R_L, on the mean over seeds of every depth,
# unweighted, with the floor fitted jointly and held to 0 ≤ L0 ≤ min_L R_L. Why this one: the floor
# is the loss depth tends to, so a floor above a measured mean loss contradicts the model it fits
# (it happened in 5 of 9 rank-limited cells when the floor was free); every depth stays in, as in
# the paper, because leaving out L = 1 discards the point that sets the fall; and with five seeds a
# standard error has four degrees of freedom, too noisy to weight by. Notebook 05 shows the other
# choices beside this one.
#
# **The exponent rule** (since the third rerun; docs/history.md, docs/statistics.md). A rank-limited
# curve falls steeply until its layers can tile R^d, at the knee L = m = lcm(d, k)/k (4 at k = 4 and
# at k = 12, 2 at k = 8), and more slowly beyond it. One primary model per sweep, chosen by goodness
# of fit: a single power law over every depth when its χ² (against the seeds' own scatter of the
# curve's shape) passes an F test at p ≥ 0.05, else the tail L ≥ m (`icl.exponents`). The check
# reads that model's α with its interval; the other fit is shown beside it as sensitivity, never as
# a veto. An α the primary fit does not identify (a floor on its bound, a standard error above α,
# fewer than four depths, one seed) is printed as "not identified" and the check is inconclusive.
# *Since the fourth rerun* (issue 54), before α is read: its interval is widened by sqrt(χ²/dof)
# where the fit scatters more than the seeds do; an exponential approach and a log-corrected 1/L
# are fitted on the same depths, and an exponential better by more than 10 in AIC fails the check
# (not a power law), an alternative better by more than 2, or as good and saying otherwise, leaves it
# inconclusive; and a check that flips when the fit starts at twice its first depth is
# inconclusive. Printed beside it, never deciding: α over every depth (the paper's estimand), the
# tail's, and a floor-free slope of log(R_L − R_2L) over the tail. Simulated curves of known
# exponent and the shapes a referee proposes, built like these, come back with their true verdict
# in docs/statistics.md's calibration table.
#
# **How sure a number is.** Every number a check reads comes with its 95 % interval over seeds: the
# jackknife's standard error times Student's t with n − 1 degrees of freedom (`icl.intervals`; the
# sweeps of one seed share their data stream and evaluation set, and a seed is left out of all of
# them at once). A check *holds* when the whole interval lies on its side of the threshold,
# *fails* when the whole interval lies on the other side, and is *inconclusive* otherwise. A claim
# whose status inconclusive checks leave open is *inconclusive*, with the range it lies in.
#
# **Core and secondary checks.** Each claim has a *core* check, the one that carries the paper's
# statement, and secondary ones: *not reproduced* when the core fails, *reproduced* when the core
# and every secondary check hold, *partly reproduced* when the core holds and a secondary does not,
# *inconclusive* when the core is. (Before the second rerun a claim was partly reproduced whenever
# some checks held; docs/history.md.)
#
# - **C4 (softmax, top-2)** — for every spectrum: core: inverse-depth decay, (a) the loss falls
#   with depth, R_deepest / R_1 < `DEPTH_FALL`, and (b) |α − 1| ≤ `ALPHA_TOL` for the primary model;
#   secondary: (c) the floor L0 is below `FLOOR_RATIO` × the linear plateau (the linear model's lowest mean
#   loss on that spectrum, paired by seed).
# - **C3 (linear, top-2)** — for every spectrum: (a) settled by depth 2: R_2 within `LINEAR_SETTLE` of the
#   lowest linear loss (core); (b) the lowest linear loss within `MC_TOL` of the Monte Carlo
#   irreducible loss of A.3 built from the context's own covariance S. *(Revised
#   after the first quick-profile numbers of an earlier version: (b) first named the population
#   covariance Σ_c, which the model never sees; both floors are shown.)*
# - **C5 (decomposition)** — core: (b) for every top-2 spectrum, L0 − C_L > 0 at every depth and
#   its fitted exponent γ satisfies |γ − 1| ≤ `GAMMA_TOL`; secondary: (c) the log-log slope of the
#   disagreement A_L − C_L over the deeper half of the depths is within ±`DISAGREE_SLOPE`. (The identity
#   R = C + (A − C)/L is arithmetic, a unit test rather than a check; its largest error is printed.)
# - **C6b (mode-wise learning)** — spread = the standard deviation across modes of
#   log10(loss_k(t)/loss_k(0)), averaged over the checkpoints after t = 0. (a) The larger softmax
#   spread (depth 1 and the deepest) is below `COLLAPSE_RATIO` × the smaller linear one (depth 1 and the deepest);
#   (b) the linear models' strongest mode reaches half its fall earlier than their weakest.
#   Core: (a).
# - **C9 (token selection)** — per context, the total-variation distance between the layer-averaged
#   attention and the target weights; percentiles across contexts, mean over seeds. (a) The deepest
#   model's 90th and 99th percentiles are below `TAIL_CUT` × depth 1's; (b) depth 1 is lower at the 1st
#   percentile. Core: (a).
# - **C10 (other spectra, top-16)** — core: inverse-depth decay of every jointly nonzero top-2
#   spectrum (R_deepest / R_1 < `DEPTH_FALL` and |α − 1| ≤ `ALPHA_TOL` for the primary model); secondary:
#   (a) every top-16 spectrum also ends below `DEPTH_FALL` × its one-layer loss; (c) the mean |α − 1| of the
#   top-16 fits exceeds that of all top-2 fits.
#
# **Along the rank axis.** C4, C5, C9 and C10 are judged with these rules separately at every
# `key_dim` (C3 concerns the linear model; C6b uses the first rank). A claim's overall status is
# *reproduced* when it is reproduced at every rank, *not reproduced* when it is not reproduced at
# any rank, and *partly reproduced* otherwise (inconclusive where the ranks' ranges leave it open).
# The thresholds live in `icl.claims.difficult`, the one place they are set; from there:

# %%
rules.show_criteria(s.params)

# %% [markdown]
# ## The runs
# The main softmax sweep at every rank and spectrum, the linear model on the same spectra (same
# seeds), and the two smaller sweeps of C10 at every rank (`icl.grids.difficult`). Mode-wise losses
# are recorded along training for `mode_spectrum` (linear model, and softmax at the first rank).

# %%
# the configs: icl.grids.difficult
runs = {name: s.run(cfgs) for name, cfgs in grids.difficult(s.params).items()}
main, linear, joint, wide = (runs[k] for k in ("main", "linear", "joint", "wide"))
frames = {
    name: tables.losses_frame(rs)
    for name, rs in dict(main=main, linear=linear, joint=joint, wide=wide).items()
}
df = pd.concat([f.assign(sweep=name) for name, f in frames.items()], ignore_index=True)
nb.save_table(s, df, "losses")
df.pivot_table(
    index=["sweep", "model", "top_k", "key_dim", "input_exponent", "task_exponent"],
    columns="depth",
    values="loss",
).round(4)

# %% [markdown]
# ## The bounds of every softmax sweep
# For every task (top-k and spectrum) and rank: the softmax bound and its β, the mixture bound, the
# linear reference (the best isotropic linear-attention predictor) and the untrained subspace
# ensembles at the sweep's depths (`icl.bounds`; no training), scored on the same evaluation set.

# %%
tasks_run = [(s["top_k"], p) for p in s["spectra"] + s["joint_spectra"]] + [
    (s["wide_top_k"], p) for p in s["wide_spectra"]
]
bound_depths = sorted(set(s["depths"]) | set(s["extra_depths"]))
bnds = {
    (k, tuple(p), kd): bounds.bounds(
        s.config(task="difficult", top_k=k, input_exponent=p[0], task_exponent=p[1], key_dim=kd),
        bound_depths,
        s["fit_contexts"],
        cache=s.cache,
    )
    for k, p in tasks_run
    for kd in key_dims
}
# top_k -> (spectrum, rank)
bounds_of = {k: {(p, kd): b for (t, p, kd), b in bnds.items() if t == k} for k, _ in tasks_run}
bound_table = bounds.table(bnds.values())
nb.save_table(s, bound_table, "bounds")
bound_table.round(4)

# %% [markdown]
# ## Training curves
# Every model must have reached its plateau before its final loss is compared across depths.
# A run whose evaluation loss still fell by more than 1 % over the last 20 % of training is marked
# not converged (hollow black circle in the loss-versus-depth figures).

# %%
label = lambda spec, extra="": plots.spectrum_label(*spec) + extra
seed0 = s["seeds"][0]
nb.save_figure(
    s,
    plots.curve_panels(
        {
            label(p, f", key_dim {k}"): runs_of(main, p, key_dim=k, seed=seed0)
            for p in s["spectra"]
            for k in key_dims
        }
    ),
    "curves_softmax",
    "Evaluation loss against training step for the softmax sweeps (first seed), one panel per spectrum and rank.",
)
nb.save_figure(
    s,
    plots.curve_panels(
        {label(p, ", linear"): runs_of(linear, p, seed=seed0) for p in s["spectra"]}
    ),
    "curves_linear",
    "Evaluation loss against training step for the linear sweeps (first seed), one panel per spectrum.",
)

# %%
nb.save_figure(
    s,
    plots.curve_panels(
        {
            **{
                label(p, f", key_dim {k}"): runs_of(joint, p, key_dim=k, seed=seed0)
                for p in s["joint_spectra"]
                for k in key_dims
            },
            **{
                label(p, f", top-{s['wide_top_k']}, key_dim {k}"): runs_of(
                    wide, p, key_dim=k, seed=seed0
                )
                for p in s["wide_spectra"]
                for k in key_dims
            },
        }
    ),
    "curves_extra",
    "Evaluation loss against training step for the joint-spectrum and wide-target sweeps (first seed).",
)
not_converged = df[~df.converged][
    ["sweep", "model", "key_dim", "input_exponent", "task_exponent", "depth", "seed", "plateau"]
]
print(f"{len(not_converged)} of {len(df)} runs had not reached their plateau")
not_converged

# %% [markdown]
# A deeper model that ends above a shallower one would point at its training, not at depth
# (docs/training_protocol.md). The largest such excess of the seed means in each sweep (0 when the
# mean loss never rises with depth):

# %%
SWEEP = ["sweep", "model", "top_k", "key_dim", "input_exponent", "task_exponent"]
inversions = tables.largest_rise(df, SWEEP)
inversions.round(4)

# %% [markdown]
# ## C3: the linear model settles within a layer or two, on the Monte Carlo floor (A.3)
# The linear model's prediction is linear in the context labels with weights linear in the inputs.
# Appendix A.3's argument: the part of the target it can predict is proportional to Σ_c x_q, so the
# rest is an irreducible loss that a Monte Carlo over contexts computes from the spectra alone
# (`theory.linear_floor_mc`, on the very sampler the models train on). The second estimate uses the
# context's empirical covariance S instead of Σ_c: a linear-attention layer computes
# x_qᵀ Γ_l (1/P) Σ_μ x_μ h_μ from the context alone and never sees Σ_c, so the best it can do in one
# layer is a predictor proportional to S x_q. Deeper linear models build polynomials of S and can
# go slightly below it, so C3 asks for agreement within 10 %, not for a bound.

# %%
floors = []
for a, b in s["spectra"]:
    cfg = s.config(
        task="difficult",
        model="linear",
        input_exponent=a,
        task_exponent=b,
        key_dim=s["linear_key_dim"],
    )
    pop = theory.linear_floor_mc(cfg, n_contexts=s["mc_contexts"])
    emp = theory.linear_floor_mc(cfg, n_contexts=s["mc_contexts"], covariance="empirical")
    part = tables.part_of(frames["linear"], input_exponent=a, task_exponent=b)
    best = estimates.plateau(part)
    floors.append(
        {
            "input_exponent": a,
            "task_exponent": b,
            "n_seeds": best.n_seeds,
            "mc_floor": pop["loss"],
            "mc_floor_se": pop["se"],
            "mc_floor_empirical": emp["loss"],
            **estimates.estimate_columns("linear_best", best),
            **estimates.estimate_columns("settle_ratio", estimates.settle_ratio(part, 2)),
            **estimates.estimate_columns("floor_match", estimates.plateau_over(part, emp["loss"])),
            "relative_gap_population": best.value / pop["loss"] - 1,
        }
    )
table3 = pd.DataFrame(floors)
nb.save_table(s, table3, "table3_linear_floor")
table3[
    [
        "input_exponent", "task_exponent", "linear_best", "linear_best_lo95", "linear_best_hi95",
        "settle_ratio", "mc_floor_empirical", "floor_match", "mc_floor", "relative_gap_population",
    ]
].round(4)

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.5))
for i, ((a, b), part) in enumerate(frames["linear"].groupby(["input_exponent", "task_exponent"])):
    plots.loss_vs_depth(ax, part, label((a, b)), color=plots.COLORS[i])
    ref = table3.set_index(["input_exponent", "task_exponent"]).loc[(a, b)]
    ax.axhline(ref.mc_floor, color=plots.COLORS[i], ls="--", lw=1, label="Monte Carlo floor, Σ_c")
    ax.axhline(
        ref.mc_floor_empirical, color=plots.COLORS[i], ls=":", lw=1, label="Monte Carlo floor, S"
    )
ax.set_title(f"linear attention, top-{s['top_k']}")
plots.legend(ax, outside=True)
linear_png = nb.save_figure(
    s, fig, "linear_vs_depth",
    "Linear attention on the difficult task against depth (C3), beside the Monte Carlo floor it cannot go below.",
)

# %% [markdown]
# ## C4: softmax loss against depth at every rank (Table 1 in our numbers)
# Rows: spectra; columns: ranks. Points: mean over seeds with their standard error; solid line: the
# protocol fit; grey: the softmax bound (solid) and the mixture bound (dotted); dashed and
# dash-dotted: the untrained random and complementary subspace ensembles of the same rank
# (best temperature per depth); dash-dot black: the linear plateau of the spectrum.

# %%
RANKED = ["key_dim", *tables.SPECTRUM]
table1 = tables.with_bounds(
    estimates.estimate_table(frames["main"], RANKED), bound_table, s["top_k"], RANKED
)
table1 = estimates.with_floor_ratios(table1, frames["main"], frames["linear"], RANKED)
table1["deepest_over_bound"] = table1.R_deepest / table1.single_bound
table1 = exponents.exponent_fits(table1, frames["main"], RANKED, s["dim"])
nb.save_table(s, table1, "table1_softmax_fits")


plateaus = {
    (a, b): v for a, b, v in zip(table3.input_exponent, table3.task_exponent, table3.linear_best)
}
softmax_png = nb.save_figure(
    s,
    plots.sweep_grid(frames["main"], s["spectra"], key_dims, bounds_of[s["top_k"]], plateaus),
    "softmax_vs_depth",
    "Softmax loss against depth at every rank and spectrum (C4), with the fit the verdict reads, a 1/L tail through the same floor, the bounds and the untrained subspace ensembles.",
)
lead_png = nb.save_figure(  # the README's lead figure: the first spectrum at every rank
    s, plots.rank_panels(frames["main"], first, key_dims, bounds_of[s["top_k"]]), "lead",
    "Softmax loss against depth at four ranks on the first spectrum, with the fit the verdict reads and a 1/L tail through the same floor.",
)
table1[
    RANKED
    + [
        "n_seeds", *exponents.COLUMNS, "L0", "fall", "floor_ratio", "deepest_over_bound",
    ]
].round(3)

# %% [markdown]
# What to look for: whether the rank-limited sweeps fall with depth and onto which floor, how that
# floor compares with the softmax bound and the linear plateau, and whether the full-rank sweeps
# move with depth at all. Per rank: the exponent the checks read (the primary model: one power
# law over every depth where its chi² says it fits, else the tail L ≥ m), then both fits with
# their chi² per degree of freedom, and the knee R_m / R_1:

# %%
for _, r in table1.iterrows():
    print(
        f"key_dim {r.key_dim}, {label((r.input_exponent, r.task_exponent))}: {exponents.describe(r)}; "
        f"R_1 {r.R_1:.3f} -> R_{r.deepest} {r.R_deepest:.3f} ({r.deepest_over_bound:.2f} x the softmax bound)"
    )

# %% [markdown]
# ### Does the exponent settle with depth?
# The local exponent between consecutive pairs of depths (L, 2L) on the first spectrum: minus the
# slope of log(R_L − R_2L) against log L, which fits no floor (`exponents.local_exponents`), with
# its 95 % interval over seeds. A power law is flat here; a curve that has not settled by the
# deepest depth drifts. The band is |α − 1| ≤ `ALPHA_TOL`; the dotted line marks the knee m.

# %%
cols = min(2, len(key_dims))  # two ranks a row: a row of four is a strip too wide to read on a page
rows_ = -(-len(key_dims) // cols)
fig, axes = plt.subplots(rows_, cols, figsize=(3.6 * cols + 2.6, 2.9 * rows_), sharey=True, squeeze=False, layout="constrained")
for ax in axes.flat[len(key_dims):]:
    ax.set_visible(False)
for ax, k in zip(axes.flat, key_dims):
    part = tables.part_of(frames["main"], key_dim=k, input_exponent=first[0], task_exponent=first[1])
    local = exponents.local_table(part)
    ax.axhspan(1 - rules.ALPHA_TOL, 1 + rules.ALPHA_TOL, color="0.9", label=f"|α − 1| ≤ {rules.ALPHA_TOL}")
    if len(local):
        ax.errorbar(local.depth, local.alpha, yerr=[local.alpha - local.alpha_lo95, local.alpha_hi95 - local.alpha],
                    fmt="o-", ms=3, color=plots.TRAINED, label="local exponent (95 % over seeds)")
    ax.axvline(exponents.knee_depth(s["dim"], k), color="0.4", ls=":", lw=1, label="knee m")
    ax.set(xlabel="depth $L$ (between pairs)", title=f"key_dim {k}", ylim=(-0.5, 3))
    plots.depth_axis(ax)
for row in axes:
    row[0].set_ylabel("local exponent")
plots.legend(axes[0][-1], outside=True)
local_png = nb.save_figure(
    s, fig, "local_exponents",
    "The local exponent along depth at every rank on the first spectrum (no floor fitted), with its 95 % interval over seeds.",
)

# %% [markdown]
# ## The rank axis on the first spectrum
# Loss over the softmax bound (1 = the best single isotropic softmax layer) at every rank, with the
# random-subspace ensembles (dashed), and the decomposition terms A_L (individual error) and C_L
# (shared error) that notebook 07 explains.

# %%
key_frame = frames["main"].query("input_exponent == @first[0] and task_exponent == @first[1]")
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for i, (k, part) in enumerate(key_frame.groupby("key_dim")):
    plots.relative_to_bound(
        axes[0], part, bnds[(s["top_k"], tuple(first), k)], plots.COLORS[i], f"key_dim {k}"
    )
    for term, ls in (("A_L", "--"), ("C_L", ":")):
        t = part.groupby("depth")[term].mean()
        axes[1].plot(
            t.index, t.values, ls, marker=".", color=plots.COLORS[i], label=f"${term}$, key_dim {k}"
        )
axes[1].set(yscale="log", xlabel="depth $L$", ylabel="decomposition term")
plots.depth_axis(axes[1])
for ax in axes:
    plots.legend(ax, outside=True)
key_png = nb.save_figure(
    s, fig, "key_dim_comparison",
    "Loss over the softmax bound at every rank on the first spectrum (left), and the decomposition terms A_L and C_L (right).",
)

# %% [markdown]
# ## C5: the ensemble decomposition at every rank (Appendix B, Table 5)
# With per-layer predictors g_l (their mean is the prediction) and errors e_l = g_l − y*:
# A_L = mean_l E[e_l²], C_L = mean over l ≠ l' of E[e_l e_l'], and exactly R_L = C_L + (A_L − C_L)/L.
# If the shared error C_L tends to the floor and the disagreement A_L − C_L to a constant, the
# loss falls as 1/L. The gap L0 − C_L is fitted as a pure power law with L0 from the loss fit.

# %%
top2 = pd.concat([frames["main"], frames["joint"]])
identity = {
    k: max(
        r["decomposition"]["identity_error"]
        for r in main + joint + wide
        if r["config"]["key_dim"] == k
    )
    for k in key_dims
}
table5 = estimates.gap_table(top2, RANKED)
nb.save_table(s, table5, "table5_shared_error")
table5[
    RANKED
    + [
        "n_seeds", "L0", "gap_positive", "gamma", "gamma_lo95", "gamma_hi95", "disagreement_slope",
        "disagreement_slope_lo95", "disagreement_slope_hi95",
    ]
].round(3)

# %%
specs = [tuple(p) for p in s["spectra"]] + [tuple(p) for p in s["joint_spectra"]]
fig, axes = plt.subplots(
    len(key_dims),
    len(specs),
    figsize=(2.3 * len(specs), 2.6 * len(key_dims)),  # 5 spectra fit a page: 11.5 in
    squeeze=False,
    sharex=True,
    layout="constrained",
)
for (i, k), (j, (a, b)) in ((ik, jp) for ik in enumerate(key_dims) for jp in enumerate(specs)):
    ax = axes[i, j]
    m = (
        top2.query("key_dim == @k and input_exponent == @a and task_exponent == @b")
        .groupby("depth")[["loss", "A_L", "C_L"]]
        .mean()
    )
    ax.plot(m.index, m.A_L, "s--", ms=3, color=plots.COLORS[4], label="$A_L$ (individual)")
    ax.plot(m.index, m.C_L, "^:", ms=3, color=plots.COLORS[3], label="$C_L$ (shared)")
    ax.plot(m.index, m.loss, "o-", ms=3, color=plots.TRAINED, label="$R_L$ (loss)")
    ax.axhline(
        table5.set_index(RANKED).loc[(k, a, b), "L0"],
        color="grey",
        lw=1,
        ls="-.",
        label="fitted floor L0",
    )
    ax.axhline(bnds[(s["top_k"], (a, b), k)]["single"], color="0.35", lw=1, label="softmax bound")
    ax.axhline(0, color="k", lw=0.5)
    ax.set(xlabel="depth $L$", title=label((a, b), f", key_dim {k}"))
    plots.depth_axis(ax)
    ax.title.set_fontsize(9)
fig.supylabel("relative error ($C_L$ can be negative)")
plots.figure_legend(fig)
decomp_png = nb.save_figure(
    s, fig, "decomposition",
    "The ensemble decomposition at every rank and spectrum (C5): the loss R_L, the individual error A_L, the shared error C_L and the fitted floor.",
)

# %% [markdown]
# ## C6b: mode-wise learning, softmax against linear (paper Fig. 7)
# Probing with teachers along single eigen-directions of the context (w = O_c e_k) gives a loss
# per mode; dividing by its value at initialisation puts all modes on one scale. If strong and weak
# modes are learned at the same rate the normalised curves lie on top of each other. Colour: mode
# index k (dark = largest input and task variance). Softmax at the first rank of `key_dims`; the
# figure shows the first seed, the numbers every seed.

# %%
probe_depths = {
    "softmax": (min(s["depths"]), max(s["depths"])),
    "linear": (min(s["linear_depths"]), max(s["linear_depths"])),
}
probe_runs = {
    (m, L, seed): runs_of(
        main if m == "softmax" else linear,
        mode_spectrum,
        depth=L,
        seed=seed,
        **({"key_dim": primary} if m == "softmax" else {}),
    )[0]
    for m, Ls in probe_depths.items()
    for L in Ls
    for seed in s["seeds"]
}
# one row per seed: spread and half-fall margin of every probe
per_seed = modes.probe_table(probe_runs)
collapse_ratio = estimates.of_seed_means(per_seed, modes.collapse_ratio)
strong_first = estimates.of_seed_means(per_seed, modes.strong_first_margin)
fig, axes = plots.panel_grid(4, 3.4, 3.0, sharey=True)
for ax, ((m, L, seed), r) in zip(
    axes, [(key, r) for key, r in probe_runs.items() if key[2] == seed0]
):
    steps_, norm = modes.normalised_mode_curves(r)
    cmap = plt.get_cmap("viridis", norm.shape[1])
    for k in range(norm.shape[1]):
        ax.plot(np.maximum(steps_, 1), norm[:, k], color=cmap(k), lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="training step",
        title=f"{m} L={L}: spread {modes.collapse_spread(norm):.3f}",
    )
for ax in axes[::2]:
    ax.set_ylabel("loss_k(t) / loss_k(0)")
modes_png = nb.save_figure(
    s, fig, "mode_curves",
    "Loss per eigen-mode over training, each divided by its value at initialisation, for softmax and linear attention (C6b).",
)
per_seed.round(3)

# %% [markdown]
# ## C9: token selection across contexts at every rank (paper Fig. 13)
# For each held-out context, the total-variation distance between the attention averaged over the
# model's layers and the target weights (1/k on the top-k tokens): 0 means the model reads exactly
# the right tokens. Percentiles across contexts, depth 1 against the deepest model (first spectrum),
# mean over seeds.

# %%
d1, dmax = min(s["depths"]), max(s["depths"])
# one row per (key_dim, depth, seed): the percentiles
selection = tables.selection_frame(runs_of(main, first))
ratios = {
    k: estimates.selection_ratios(selection[selection.key_dim == k], dmax, d1) for k in key_dims
}
fig, axes = plots.panel_grid(len(key_dims), 3.4, 3.0, sharey=True)
for ax, k in zip(axes, key_dims):
    for L in (d1, dmax):
        curve = np.mean(
            [r["token_selection"]["distance"] for r in runs_of(main, first, depth=L, key_dim=k)],
            axis=0,
        )
        ax.plot(main[0]["token_selection"]["percentile"], curve, label=f"L = {L}")
    ax.set(xlabel="percentile across contexts", title=f"key_dim {k}")
axes[0].set_ylabel("token-selection distance (TV)")
plots.legend(axes[0])
selection_png = nb.save_figure(
    s, fig, "token_selection",
    "How far the attention, averaged over layers, is from the target's top-k weights, across held-out contexts (C9): depth 1 against the deepest model.",
)
pd.DataFrame(
    {k: {p: estimates.interval_text(e, 3) for p, e in row.items()} for k, row in ratios.items()}
)

# %% [markdown]
# ## C10: jointly nonzero spectra and top-16 aggregation at every rank (Table 4 in our numbers)

# %%
table4 = pd.concat(
    [
        tables.with_bounds(
            estimates.estimate_table(frames[f], RANKED), bound_table, k, RANKED
        ).assign(top_k=k)
        for f, k in (("joint", s["top_k"]), ("wide", s["wide_top_k"]))
    ],
    ignore_index=True,
)
other_frames = pd.concat(
    [frames["joint"].assign(top_k=s["top_k"]), frames["wide"].assign(top_k=s["wide_top_k"])]
)
table4 = exponents.exponent_fits(table4, other_frames, ["top_k", *RANKED], s["dim"])
nb.save_table(s, table4, "table4_other_targets")
joint_png = nb.save_figure(
    s,
    plots.sweep_grid(frames["joint"], s["joint_spectra"], key_dims, bounds_of[s["top_k"]]),
    "joint_vs_depth",
    "Softmax loss against depth on jointly nonzero spectra (C10), drawn as in the C4 figure.",
)
other_png = nb.save_figure(
    s,
    plots.sweep_grid(frames["wide"], s["wide_spectra"], key_dims, bounds_of[s["wide_top_k"]]),
    "other_targets_vs_depth",
    "Softmax loss against depth for the wide top-k target (C10), drawn as in the C4 figure.",
)
sweeps_of = lambda name, k: [
    g for _, g in tables.part_of(frames[name], key_dim=k).groupby(tables.SPECTRUM)
]
deviation_gap = {
    k: estimates.deviation_gap(sweeps_of("wide", k), sweeps_of("main", k) + sweeps_of("joint", k))
    for k in key_dims
}
table4[
    [
        "top_k", *RANKED, "n_seeds", *exponents.COLUMNS, "fall", "R_deepest", "single_bound",
    ]
].round(3)

# %% [markdown]
# ## Verdicts

# %%
rank = {
    k: {
        name: tables.part_of(t, key_dim=k)
        for name, t in dict(table1=table1, table4=table4, table5=table5).items()
    }
    for k in key_dims
}  # each table's rows at each rank
regime = {k: f"key_dim {k}" for k in key_dims}  # C4, C5, C9 and C10 are judged at every rank
# whether the runs each core reads had stopped falling (icl.claims.at_plateau)
main_at = {k: at_plateau(tables.part_of(frames["main"], key_dim=k)) for k in key_dims}
joint_at = {k: at_plateau(tables.part_of(frames["joint"], key_dim=k)) for k in key_dims}
modes_at = at_plateau(
    tables.part_of(frames["main"], key_dim=primary, input_exponent=mode_spectrum[0], task_exponent=mode_spectrum[1]),
    tables.part_of(frames["linear"], input_exponent=mode_spectrum[0], task_exponent=mode_spectrum[1]),
)
checks = {
    "C3": {**rules.c3(table3), PLATEAU: at_plateau(frames["linear"])},
    "C6b": {**rules.c6b(collapse_ratio, strong_first), PLATEAU: modes_at},
    "C4": {regime[k]: {**rules.c4(rank[k]["table1"]), PLATEAU: main_at[k]} for k in key_dims},
    "C5": {regime[k]: {**rules.c5(rank[k]["table5"]), PLATEAU: main_at[k]} for k in key_dims},
    "C9": {regime[k]: {**rules.c9(ratios[k]), PLATEAU: main_at[k]} for k in key_dims},
    "C10": {
        regime[k]: {
            **rules.c10(
                rank[k]["table4"], tables.part_of(rank[k]["table4"], top_k=s["top_k"]), deviation_gap[k]
            ),
            PLATEAU: joint_at[k],
        }
        for k in key_dims
    },
}
shown = {
    "C4": {
        regime[k]: rules.c4_numbers(rank[k]["table1"], tables.part_of(frames["main"], key_dim=k))
        for k in key_dims
    },
    "C5": {regime[k]: rules.c5_numbers(rank[k]["table5"], identity[k]) for k in key_dims},
    "C9": {regime[k]: rules.c9_numbers(ratios[k]) for k in key_dims},
    "C10": {regime[k]: rules.c10_numbers(rank[k]["table4"], deviation_gap[k]) for k in key_dims},
}
for cid, figure in {
    "C4": softmax_png,
    "C5": decomp_png,
    "C9": selection_png,
    "C10": other_png,
}.items():
    rules.record_by_regime(s.params, cid, checks[cid], shown[cid], figure)
rules.record(s.params, "C3", checks["C3"], rules.c3_numbers(table3), linear_png)
rules.record(
    s.params,
    "C6b",
    checks["C6b"],
    {
        "softmax spread / linear spread": collapse_ratio,
        "linear half-fall margin (steps)": strong_first,
        "spectrum": mode_spectrum,
        "softmax key_dim": primary,
    },
    modes_png,
)
numbers = {
    "table1": table1.to_dict("records"),
    "table3": table3.to_dict("records"),
    "table4": table4.to_dict("records"),
    "table5": table5.to_dict("records"),
    "bounds": bound_table.to_dict("records"),
    "identity_error": identity,
    "modes_per_seed": per_seed.reset_index().to_dict("records"),
    "not_converged": not_converged.to_dict("records"),
    "largest_rise_with_depth": inversions.to_dict("records"),
}
results_path = nb.write_results(s, numbers)

# %% [markdown]
# The regression check below prints the seed-mean losses and the bounds, which survive another CPU
# and another thread count at the precision shown (`scripts/variants.py`), and the verdicts; the
# fitted exponents above are not printed here at the `ci` profile's scale, where most fits are
# ill-conditioned.

# %%
# NBVAL_CHECK_OUTPUT
nb.show(
    {
        "softmax R_1": table1.R_1.tolist(),
        "softmax R_deepest": table1.R_deepest.tolist(),
        "softmax bound": table1.single_bound.tolist(),
        "linear plateau": table3.linear_best.tolist(),
        "MC floor (S)": table3.mc_floor_empirical.tolist(),
        "other R_deepest": table4.R_deepest.tolist(),
        "identity error < 1e-6": max(identity.values()) < 1e-6,
    },
    digits=2,
)
show_claims(s.params)
