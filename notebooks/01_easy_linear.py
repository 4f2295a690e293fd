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
# # Easy task, linear attention (paper §3.1, A.1, A.2, A.4; claims C1 and C6a)
#
# **Question.** On the easy task the query is a copy of one context token and the target is that
# token's label, y* = w·x_q. Linear attention cannot pick the matching token out of the context;
# the only route it has is regression: recover w from the context and apply it to x_q. How fast
# does its loss fall as layers are added, does the rate depend on the input and teacher spectra,
# and which directions of the data does it learn first?
#
# **The model (paper §2).** Layer l has its own Q_l, K_l. Context label states move by
# h ← h − (1/L)·X Γ_l Xᵀh / P and the query's by h_q ← h_q + (1/L)·x_qᵀ Γ_l Xᵀh / P, with
# Γ_l = Q_lᵀK_l. Write the context labels as h = X v (they start at v = w). Then one layer is
# v ← (I − Γ_l S / L) v with S = XᵀX / P: a step of preconditioned gradient descent on the
# context's own least-squares problem. After L layers the prediction is x_qᵀ M(S) S w, where M is
# an ordered matrix polynomial of degree L − 1 in S (A.1).
#
# **Why depth helps.** The perfect answer would be M = S⁻¹ (then the prediction is x_qᵀw exactly).
# What is left is the residual polynomial q(s) = 1 − s·m(s): degree L, pinned at q(0) = 1, and it
# must be small at every eigenvalue s of S, weighted by how much target variance that direction
# carries. Large eigenvalues are easy; eigenvalues near zero sit next to the pinned point and need
# a high degree. So the error falls with L at a rate set by how the spectrum reaches towards zero:
# a power law only while L is small against the spectral range λ₁/λ_d (roughly √range for the best
# polynomial, range for repeated equal steps). With an isotropic spectrum and P → ∞ every
# eigenvalue is the same and one layer suffices; at finite P the eigenvalues of S spread out, and
# depth helps again.
#
# **Two references (A.2).** *Repeated update*: the same step γ/L applied L times,
# q(s) = (1 − γs/L)^L with the best γ. *Free polynomial*: the best degree-L q with q(0) = 1. Both
# are computed in the population limit (S = Σ, Gaussian inputs) and by Monte Carlo on the data the
# model trains on: unit-sphere inputs at this P, coefficients shared by all contexts
# (`icl.theory`). The trained model can represent the free polynomial in principle (a product of
# linear factors with real roots), so the paper's claim is that it lands between the two.

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from icl import estimates, grids, held_out, modes, plots, runs_of, show_claims, tables, theory
from icl import notebook as nb
from icl.claims import PLATEAU, at_plateau
from icl.claims import easy as rules

plots.style()

# %% tags=["parameters"]
profile = "quick"  # which params/<profile>/ file these values came from (informational)
output_dir = "outputs/scratch/01_easy_linear"  # a run by hand (git-ignored); icl reproduce: outputs/<profile>/
cache_dir = "outputs/runs"  # run cache; None trains afresh, keeping nothing on disk
device = "auto"
threads = 0  # torch CPU threads; 0 keeps torch's default
progress = True
dim = 32
context_length = 128  # four times dim: with P close to dim the context covariance is badly conditioned
key_dim = 0  # 0 means: the same as dim
residual_scale = "inverse_depth"
steps = 2000  # chosen on the validation set: docs/training_protocol.md, section 7
batch_size = 128
learning_rate = 0.003
lr_depth_exponent = 0.4  # depth L trains at learning_rate times L to this power (see the Runs section)
init_scale = 1.0
eval_contexts = 1024
eval_points = 20
depths = [1, 2, 4, 8, 16, 32]
seeds = [0, 1, 2]
spectra = [[1.0, 1.0], [1.5, 0.5], [2.0, 0.0], [0.0, 0.0]]  # [input_exponent, task_exponent]
mode_spectrum = [2.0, 0.0]  # whose modes are tracked along training; the first spectrum if absent
reference_contexts = 500  # sampled contexts per Monte Carlo reference
mode_level = 0.1  # a mode counts as learned once loss_k / loss_k at the start falls below this
input_exponent = None  # set both (papermill -p) to run one custom spectrum instead of `spectra`
task_exponent = None
nb.end_of_parameters(globals())

# %%
s = nb.parameters(globals())
mode_spec = s["mode_spectrum"] if s["mode_spectrum"] in s["spectra"] else s["spectra"][0]
label = lambda sp: plots.spectrum_label(*sp)

# %% [markdown]
# ## Verdict criteria (written before the runs)
#
# Every fit is a pure power law R_L = c·L^(−α) (floor L0 fixed at 0: on the easy task nothing
# stops the loss from falling to zero), least squares in log space over all trained depths, on
# the mean over seeds. Reference exponents are fitted the same way over the same depths.
#
# **How sure a number is.** Every number a check reads comes with its 95 % interval from a
# jackknife over seeds (`icl.intervals`: each seed left out in turn, the mean curve refitted, Student's t).
# A check *holds* when the whole interval lies on its side of the threshold, *fails* when the whole
# interval lies on the other side, and is *inconclusive* otherwise; a claim whose status
# inconclusive checks leave open is *inconclusive*, with the range it lies in. With a single seed
# there is no interval and the value decides. *(The only change to the criteria below since they
# were first written: this interval rule replaces the standard-error allowances of C1 (b) and (c),
# "within 2 standard errors of the references" and "3 combined standard errors apart", and C6a now
# reads every seed instead of seed 0. The thresholds are unchanged.)*
#
# **Core and secondary checks** (since the second rerun; docs/history.md): each claim has a *core*
# check, the one that carries the paper's statement. Not reproduced when the core fails; reproduced
# when the core and every secondary check hold; partly reproduced when the core holds and a
# secondary does not; inconclusive when the core's interval straddles its threshold.
#
# - **C1 (depth scaling of linear attention)**, judged on the spectra with a > 0:
#   (a) the power law describes the losses: R² at least `R2_MIN` for every spectrum;
#   (b) at every depth the trained loss lies between the Monte Carlo reference curves: R_L at most
#   (1 + `REF_TOL`) × the repeated update's and at least (1 − `REF_TOL`) × the free polynomial's, for every
#   spectrum (since the third rerun; before, α_rep ≤ α ≤ α_free, which follows from neither
#   reference: a stack of layer-specific preconditioners holds the repeated update and is a
#   polynomial of degree at most L, so it is the losses, not the exponents, that the two bound);
#   (c) the exponent depends on the spectrum: for some pair of spectra the difference of their
#   exponents (paired by seed) exceeds `SPECTRUM_GAP` in size, i.e. its interval lies beyond it (against 0
#   this check could only fail for a difference of exactly 0). **Core: (b)**; (a) and (c) are
#   secondary. Every run (b) reads must have reached its plateau; where some had not, C1 is
#   inconclusive for want of budget, whichever side its numbers lie on. The isotropic spectrum (one layer
#   suffices in the population limit) is reported beside them, against its Monte Carlo references.
# - **C6a (linear attention learns strong modes first)**, on the tracked spectrum:
#   (a) along training, weaker modes are learned later: the rank correlation between the mode
#   index k (0 = largest input variance) and the step at which mode k covered half of its fall,
#   mean over seeds, is at least `ORDER_MIN` for depth 1 and for the deepest model;
#   (b) across depth, weaker modes need more layers: the strongest mode's normalised final loss
#   (mean over seeds) is below `mode_level` by depth `FEW_LAYERS`, the weakest mode's is not. **Core: (a)**.
#
# The thresholds and the code that turns the numbers into checks live in `icl.claims.easy`, the one
# place they are set; from there:

# %%
rules.show_criteria(s.params, "C1", "C6a")

# %% [markdown]
# ## What the references predict, before any training
# The spectral range λ₁/λ_d of the population and the median range of S over sampled contexts;
# the loss of each reference at every trained depth. The population free polynomial interpolates
# all d eigenvalues, so it is exactly zero from L = d on; the isotropic population references are
# zero at every depth.

# %%
refs = {
    tuple(sp): theory.references(
        s.config(model="linear", task="easy", input_exponent=sp[0], task_exponent=sp[1]),
        s["depths"],
        s["reference_contexts"],
    )
    for sp in s["spectra"]
}
ref_rows = [
    {"spectrum": label(sp), "kind": f"{where} {kind}", **dict(zip(s["depths"], r[where][kind]))}
    for sp, r in refs.items()
    for where in ("population", "mc")
    for kind in ("repeated", "free")
]
nb.save_table(s, pd.DataFrame(ref_rows), "reference_losses")
pd.DataFrame(ref_rows).set_index(["spectrum", "kind"]).map("{:.3g}".format)

# %% [markdown]
# ## Runs
# Every depth of a (spectrum, seed) pair trains in one batched pass (`icl.train`); the mode-wise
# probe (teachers along single eigen-directions) is recorded along training for one spectrum.
# With the 1/L residual factor the preconditioners of a depth-L model must grow like L, so a fixed
# Adam step moves deep models relatively slowly; the learning rate grows with depth,
# learning_rate·L^lr_depth_exponent. In our trials a constant rate left the deep models far from
# their plateau, and a larger one at depth 32 (0.023 instead of 0.017) made the (2, 0) model
# diverge: fitting a high-degree polynomial in S is badly conditioned. A run whose final loss is
# above its initial loss is marked diverged and left out of the fits.
#
# The budget and the exponent were chosen on the validation set (`docs/training_protocol.md`,
# section 7, where every candidate's numbers are): 2,000 steps at 0.003·L^0.4 (0.012 at depth 32).
# Against the first protocol (1,000 steps at 0.003·L^0.5) it lowers the validation loss at 16 of
# the 18 depths tried (three spectra, seed 0), by up to a factor of 2.2 for the deep isotropic
# models. Faster training diverged at depth 16 or 32 of (2, 0): 2,000 steps at L^0.5 (seed 1),
# the exponent 0.75 with a 2 % or a 10 % warm-up, 4,000 steps of half-size batches, 3,000 steps at
# L^0.5. Even so a deep model may not reach its plateau within this budget: a run whose loss still
# falls by more than 1 % over the last 20 % of training is drawn as a hollow point, and its loss is
# an upper bound.

# %%
runs = s.run(grids.easy_linear(s.params)["linear"])  # the configs: icl.grids.easy_linear
df = tables.losses_frame(runs).assign(diverged=[r["final_loss"] > r["initial_loss"] for r in runs])
nb.save_table(s, df, "losses")
df.pivot_table(index=["input_exponent", "task_exponent"], columns="depth", values="loss").map(
    "{:.4g}".format
)

# %% [markdown]
# ## Training curves
# Every depth must reach its plateau before its final loss means anything (hollow circles in the
# loss-against-depth figure mark runs that did not). Every seed is drawn.

# %%
curves_png = nb.save_figure(
    s, plots.curve_panels({label(sp): runs_of(runs, sp) for sp in s["spectra"]}), "training_curves",
    "Evaluation loss against training step for every depth and seed, one panel per spectrum: each run should flatten before its final loss is read.",
)
means = (
    df[~df.diverged]
    .groupby(["input_exponent", "task_exponent", "depth"])
    .loss.mean()
    .unstack("depth")
)
rises = {
    label(k): [
        int(L) for L, a, b in zip(means.columns[1:], row.values[1:], row.values[:-1]) if a > b
    ]
    for k, row in means.iterrows()
}
print(
    "converged:",
    int(df.converged.sum()),
    "of",
    len(df),
    "| diverged:",
    int(df.diverged.sum()),
    "| depths whose mean loss is above the next shallower one:",
    rises,
)

# %% [markdown]
# ## C1: loss against depth, with both references (paper §3.1, A.2)
# Points: mean over seeds with their standard error; line: the fitted power law. Dashed: repeated
# update, dotted: free polynomial (colour: Monte Carlo at this P; grey: population limit).

# %%
trained = df[~df.diverged]
parts = {
    (a, b): trained[(trained.input_exponent == a) & (trained.task_exponent == b)]
    for a, b in s["spectra"]
}
fits = {sp: tables.fit_depths(part, L0=0.0) for sp, part in parts.items()}

# %%
fig, axes = plots.panel_grid(len(s["spectra"]), 3.6, 3.4)
for ax, sp in zip(axes, s["spectra"]):
    part = parts[tuple(sp)]
    plots.loss_vs_depth(
        ax, part, "trained (mean ± s.e. over seeds)",
        color=plots.TRAINED,
        fit=fits[tuple(sp)],
        fit_label=r"fit $L_0 + c\,L^{-\alpha}$, $L_0 = 0$",
    )
    r = refs[tuple(sp)]
    for kind, ls in (("repeated", "--"), ("free", ":")):
        ax.plot(
            s["depths"],
            np.where(r["mc"][kind] > 0, r["mc"][kind], np.nan),
            ls,
            color=plots.COLORS[1],
            label=f"MC {kind}",
        )
        ax.plot(
            s["depths"],
            np.where(r["population"][kind] > 0, r["population"][kind], np.nan),
            ls,
            color="grey",
            lw=1,
            label=f"population {kind}",
        )
    ax.set_ylim(max(1e-6, 0.3 * part.loss.min()), 2 * max(part.loss.max(), r["mc"]["repeated"][0]))
    ax.set_title(f"{label(sp)}\nα = {fits[tuple(sp)].alpha:.2f}", fontsize=9)
    ax.set_ylabel("relative loss $R_L$")
plots.figure_legend(fig)
depth_png = nb.save_figure(
    s, fig, "loss_vs_depth",
    "Linear attention's loss against depth, one panel per spectrum, beside the repeated-update and free-polynomial references; alpha is the fitted power-law exponent.",
)

# %% [markdown]
# ## C1: the exponents (Table 2 in our numbers)
# The measured α and R² with their 95 % intervals over seeds (`alpha_se` is the fit's own standard
# error on the mean curve, which says how well the curve is fitted, not how much it moves with the
# seed), beside the reference exponents and the spectral ranges.

# %%
fitted = (
    estimates.estimate_table(trained, tables.SPECTRUM, L0=0.0)
    .drop(columns="r2")
    .merge(
        estimates.per_sweep(trained, tables.SPECTRUM, estimates.fit_quality, L0=0.0),
        on=[*tables.SPECTRUM, "n_seeds"],
    )
)
table2 = pd.DataFrame(
    [tables.reference_row(sp, refs[tuple(sp)], s["depths"]) for sp in s["spectra"]]
).merge(fitted, on=tables.SPECTRUM)
nb.save_table(s, table2, "table2_exponents")
judged = table2[table2.input_exponent > 0]  # C1's spectra; the isotropic one is shown beside them
differences = estimates.exponent_differences(
    {label(sp): parts[sp] for sp in zip(judged.input_exponent, judged.task_exponent)}, L0=0.0
)
table2[
    [
        "spectrum", "n_seeds", "alpha", "alpha_lo95", "alpha_hi95", "alpha_se", "r2", "r2_lo95",
        "r2_hi95", "alpha_rep_mc", "alpha_free_mc", "alpha_rep_pop", "alpha_free_pop",
        "range_population", "range_context_median", "fit_problem",
    ]
].round(3)

# %% [markdown]
# ## A.1: the trained model is a covariance polynomial
# Read the preconditioners Γ_l and the readout off the deepest trained model of the tracked
# spectrum, build M(S) for every held-out context, and predict x_qᵀ M(S) S w: its loss must equal
# the model's own evaluation loss. How isotropic the learned Γ_l are: the share of each Γ_l's
# Frobenius norm that lies along the identity (1 for Γ_l ∝ I), averaged over layers.

# %%
deep = runs_of(runs, mode_spec, depth=max(s["depths"]), seed=s["seeds"][0])[0]
gammas, readout, scale = modes.polynomial_of(deep)
ev = held_out(
    s.config(
        **{k: deep["config"][k] for k in ("model", "task", "input_exponent", "task_exponent")}
    ),
    torch.device("cpu"),
)
x, xq, w, target = (t.double().numpy() for t in (ev.x, ev.xq, ev.teacher, ev.target))
poly_pred = modes.polynomial_predictions(gammas, readout, x, xq, w, scale)
poly_loss = float(np.mean((poly_pred - target) ** 2) / np.mean(target**2))
isotropy = float(np.mean([abs(np.trace(g)) / np.sqrt(len(g)) / np.linalg.norm(g) for g in gammas]))
pd.Series(
    {
        "model's evaluation loss": deep["final_loss"],
        "polynomial's loss, same contexts": poly_loss,
        "relative difference": abs(poly_loss / deep["final_loss"] - 1),
        "isotropy of Γ_l": isotropy,
    }
)

# %% [markdown]
# The effective polynomial λ·p(λ), p(λ) = tr M(λI)/d: the gain the model applies to a direction of
# variance λ (1 means that direction is fully learned). Dots: the exact rotation-averaged gain on
# each population eigen-mode (unit-sphere second moments); ticks: the population eigenvalues; shaded:
# the 5th to 95th percentile of S's eigenvalues in the held-out contexts. Nothing constrains the
# polynomial above the largest eigenvalues the model sees, and deep models' polynomials leave the
# plotted range there.

# %%
lam_sphere = theory.sphere_spectrum(theory.spectra(s["dim"], *mode_spec)[0])
s_eigs = np.linalg.eigvalsh(np.einsum("bpi,bpj->bij", x, x) / x.shape[1]).ravel()
grid = np.geomspace(max(s_eigs.min(), 1e-4), s_eigs.max(), 200)
fig, ax = plt.subplots(figsize=(5.5, 3.4))
gains = {}
for L in sorted(s["depths"]):
    g, rd, sc = modes.polynomial_of(runs_of(runs, mode_spec, depth=L, seed=s["seeds"][0])[0])
    line = ax.plot(grid, modes.effective_polynomial(g, rd, grid, sc), lw=1.2, label=f"L = {L}")
    gains[L] = modes.mode_gains(g, rd, lam_sphere, sc, n_rotations=32)
    ax.plot(
        lam_sphere,
        gains[L],
        "o",
        ms=3,
        color=line[0].get_color(),
        label="gain per eigen-mode (dots)",
    )
ax.axvspan(
    *np.percentile(s_eigs, [5, 95]), color="grey", alpha=0.1, label="S's eigenvalues, 5-95 %"
)
ax.plot(
    lam_sphere,
    np.full_like(lam_sphere, -0.05),
    "|",
    color="k",
    ms=8,
    label="population eigenvalues",
)
ax.axhline(1, color="k", lw=0.8, ls="--", label="fully learned")
ax.set(
    xscale="log",
    xlabel="eigenvalue λ",
    ylabel="λ·p(λ)",
    ylim=(-0.2, 1.8),
    title=f"trained polynomials, {label(mode_spec)}",
)
plots.legend(ax, outside=True)
poly_png = nb.save_figure(
    s, fig, "covariance_polynomial",
    "The gain the trained linear stack applies to each direction of input variance, at each depth: 1 means that direction is fully learned.",
)
pd.DataFrame(
    {
        "gain, strongest mode": {L: v[0] for L, v in gains.items()},
        "gain, weakest mode": {L: v[-1] for L, v in gains.items()},
    }
).rename_axis("depth").round(3)

# %% [markdown]
# ## C6a: which modes are learned first (paper §3.1; Fig. 7's linear half)
# Probe teachers along single eigen-directions, w = O_c e_k, give a loss per mode; dividing by its
# value at initialisation puts every mode on one scale. Colour: mode index k (dark = largest input
# variance). If strong directions are learned first the dark curves fall first. The figure shows
# the first seed; the table below every seed: the learning order (rank correlation between mode
# index and half-fall step) at depth 1 and the deepest, and the normalised final loss of the
# strongest and the weakest mode at every depth.

# %%
tracked = {L: runs_of(runs, mode_spec, depth=L) for L in s["depths"]}
shown = [min(s["depths"]), max(s["depths"])]
fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
for ax, L in zip(axes, shown):
    steps_, norm = modes.normalised_mode_curves(tracked[L][0])
    order = modes.learning_order(modes.half_fall_steps(steps_, norm))
    cmap = plt.get_cmap("viridis", norm.shape[1])
    for k in range(norm.shape[1]):
        ax.plot(np.maximum(steps_, 1), norm[:, k], color=cmap(k), lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="training step",
        title=f"L = {L}, seed {s['seeds'][0]}: order {order:.2f}, spread {modes.collapse_spread(norm):.2f}",
    )
axes[0].set_ylabel("loss_k(t) / loss_k(0)")
modes_png = nb.save_figure(
    s, fig, "mode_curves",
    "Loss per eigen-mode over training, each divided by its value at initialisation (dark: the largest input variance), for the first seed.",
)
per_seed = modes.learning_table(
    {(L, r["config"]["seed"]): r for L, rs in tracked.items() for r in rs}, shown
)
mode_numbers = estimates.mode_estimates(per_seed, shown, rules.FEW_LAYERS)
per_seed.round(3)

# %% [markdown]
# ## C6a and A.4: final mode-wise loss against depth
# Left: the repeated-update reference mode by mode (population, unit-sphere second moments): each
# mode's residual falls exponentially once L passes its own characteristic depth (~1/λ_k), and the
# weighted sum of these exponentials is what looks like a power law. Right: the trained models'
# normalised final loss per mode (mean over seeds), same colours, with the level `mode_level`.

# %%
omega = theory.spectra(s["dim"], *mode_spec)[1]
dense = np.unique(np.geomspace(1, max(s["depths"]), 40).astype(int))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    residuals, weights = modes.repeated_update_residuals(lam_sphere, omega, dense)
finals = np.array(
    [
        np.mean([modes.normalised_mode_curves(r)[1][-1] for r in tracked[L]], axis=0)
        for L in s["depths"]
    ]
)
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4), sharey=True)
cmap = plt.get_cmap("viridis", len(lam_sphere))
for k in range(len(lam_sphere)):
    axes[0].plot(
        dense, residuals[:, k], color=cmap(k), lw=0.8, label="one mode (colour: eigenvalue rank)"
    )
    axes[1].plot(
        s["depths"],
        finals[:, k],
        "o-",
        color=cmap(k),
        lw=0.8,
        ms=2,
        label="one mode (colour: eigenvalue rank)",
    )
axes[0].plot(dense, residuals @ weights, "k-", lw=2, label="weighted sum (the loss)")
axes[1].plot(s["depths"], means.loc[tuple(mode_spec)].values, "k-", lw=2, label="relative loss")
for ax, title in zip(axes, ("repeated update, per mode", "trained, per mode")):
    ax.axhline(s["mode_level"], color="grey", ls="--", lw=1, label="mode_level")
    ax.set(yscale="log", xlabel="depth $L$", title=title)
    plots.depth_axis(ax)
axes[0].set_ylabel("loss_k / loss_k(no model)")
axes[0].set_ylim(1e-4, 2)
plots.figure_legend(fig)
a4_png = nb.save_figure(
    s, fig, "modes_vs_depth",
    "Final loss per eigen-mode against depth: the repeated-update reference (left) and the trained models (right), in the same colours.",
)

# %% [markdown]
# The depth at which each mode first drops below `mode_level`: trained (smallest trained depth)
# against the repeated-update reference (smallest integer depth), by the mode's variance λ_k.

# %%
conv_trained = modes.trained_convergence_depths(s["depths"], finals, s["mode_level"])
conv_repeated = modes.convergence_depths(
    lam_sphere, omega, max_depth=max(s["depths"]), level=s["mode_level"]
)
conv = pd.DataFrame(
    {"lambda_k": lam_sphere, "trained": conv_trained, "repeated update": conv_repeated}
)
nb.save_table(s, conv.assign(k=np.arange(len(conv))), "mode_convergence_depths")
conv.T.round(2)

# %% [markdown]
# ## Verdicts

# %%
judged_spectra = list(zip(judged.input_exponent, judged.task_exponent))
over_refs = {  # R_L over each reference curve at every depth, per judged spectrum
    label(sp): {
        kind: list(estimates.over_curve(parts[sp], dict(zip(s["depths"], refs[sp]["mc"][kind]))).values())
        for kind in ("repeated", "free")
    }
    for sp in judged_spectra
}
checks = {
    "C1": {
        **rules.c1(judged, differences, over_refs),
        PLATEAU: at_plateau(*(parts[sp] for sp in judged_spectra)),
    },
    "C6a": {**rules.c6a(mode_numbers, s["mode_level"]), PLATEAU: at_plateau(parts[tuple(mode_spec)])},
}
by_spectrum = {
    name: {r.spectrum: estimates.estimate(r, name) for _, r in judged.iterrows()}
    for name in ("alpha", "r2")
}
rules.record(
    s.params,
    "C1",
    checks["C1"],
    {
        "alpha": by_spectrum["alpha"],
        "R2": by_spectrum["r2"],
        "alpha repeated update (MC)": dict(zip(judged.spectrum, judged.alpha_rep_mc)),
        "alpha free polynomial (MC)": dict(zip(judged.spectrum, judged.alpha_free_mc)),
        "alpha differences": differences,
        "R_L / repeated update": {sp: r["repeated"] for sp, r in over_refs.items()},
        "converged": bool(df.converged.all()),
        "diverged runs": int(df.diverged.sum()),
        **rules.budget_note(checks["C1"][PLATEAU], df.plateau),
    },
    depth_png,
)
rules.record(
    s.params,
    "C6a",
    checks["C6a"],
    {
        "spectrum": mode_spec,
        **mode_numbers,
        "convergence depth strongest/weakest": [conv_trained[0], conv_trained[-1]],
        **rules.budget_note(checks["C6a"][PLATEAU], parts[tuple(mode_spec)].plateau),
    },
    modes_png,
)
nb.write_results(
    s,
    {
        "exponents": table2.drop(columns=["spectrum"]).to_dict("records"),
        "polynomial_loss": poly_loss,
        "model_loss": deep["final_loss"],
        "gamma_isotropy": isotropy,
        "modes_per_seed": per_seed.reset_index().to_dict("records"),
        "convergence_trained": conv_trained.tolist(),
        "convergence_repeated": conv_repeated.tolist(),
        "exponent_differences": {k: e.to_dict() for k, e in differences.items()},
        "checks": checks,
        "rises": rises,
        "figures": [curves_png, depth_png, poly_png, modes_png, a4_png],
    },
)

# %% [markdown]
# The regression check below prints the seed-mean losses at one layer and at the deepest, the
# exponents only where the fit's conditioning rule finds them sound (`nb.fit_value`), the ratio of
# the covariance polynomial's loss to the model's (1 when A.1 holds), and the verdicts.

# %%
# NBVAL_CHECK_OUTPUT
nb.show(
    {
        "R_1 per spectrum": table2.R_1.tolist(),
        "R_deepest per spectrum": table2.R_deepest.tolist(),
        "alpha per spectrum": [nb.fit_value(r.alpha, r.fit_problem) for r in table2.itertuples()],
        "polynomial / model loss": poly_loss / deep["final_loss"],
    },
    digits=2,
)
show_claims(s.params)

# %% [markdown]
# ## Reading the results
#
# What to look for. In the loss-against-depth figure: whether every spectrum's points lie on a
# straight line in log-log axes (C1 a), and where the trained line runs against the two Monte Carlo
# references, which a model with its own preconditioner in every layer should at least match
# (repeated update) and cannot beat with a polynomial of its degree (free polynomial). In Table 2:
# whether the exponents of different spectra are told apart by their intervals, and whether steeper
# input spectra scale more slowly, as A.2 predicts. In the training curves: how many deep runs were
# still falling at the end (hollow points): their losses are upper bounds, so their exponents may
# underestimate what longer training gives. In A.1: whether the covariance polynomial read off the
# weights reproduces the model's loss. Mode by mode: whether weak modes need more layers (A.4,
# beside the repeated-update reference), and whether the strong modes fall first along training at
# depth 1 as well as at the deepest model. From this run:

# %%
for _, r in table2.iterrows():
    alpha = nb.fit_value(estimates.interval_text(estimates.estimate(r, "alpha")), r.fit_problem)
    print(
        f"{r.spectrum}: alpha {alpha}, R2 {estimates.interval_text(estimates.estimate(r, 'r2'), 3)}; references "
        f"{r.alpha_rep_mc:.2f} (repeated update) to {r.alpha_free_mc:.2f} (free polynomial), Monte Carlo"
    )
print(
    f"{int((~df.converged).sum())} of {len(df)} runs still fell by more than 1 % over their last 20 % of training; "
    f"{int(df.diverged.sum())} diverged"
)
print(
    f"A.1: the covariance polynomial's loss is {poly_loss / deep['final_loss']:.6f} x the model's own"
)
depth_text = lambda v: (
    f"by depth {v:g}" if np.isfinite(v) else f"not within {max(s['depths'])} layers"
)
print(
    f"modes: the strongest falls below {s['mode_level']} {depth_text(conv_trained[0])}, the weakest "
    f"{depth_text(conv_trained[-1])} (repeated update: {depth_text(conv_repeated[0])} and {depth_text(conv_repeated[-1])})"
)
print(
    "learning order (mean over seeds): "
    + ", ".join(
        f"{k.split()[-1]} {estimates.interval_text(e)}"
        for k, e in mode_numbers.items()
        if k.startswith("learning order")
    )
)
