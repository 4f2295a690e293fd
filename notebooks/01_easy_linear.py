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

from icl import claims, modes
from icl import notebook as nb
from icl import plots, tables, theory
from icl.sweep import runs_of
from icl.tasks import held_out

plots.style()

# %% tags=["parameters"]
profile = "quick"  # which params/<profile>/ file these values came from (informational)
output_dir = "outputs/01_easy_linear"  # figures, tables, results.json (relative to the repo root)
cache_dir = "outputs/runs"  # run cache; None trains afresh into a temporary folder
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
seeds = [0, 1]
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
# - **C1 (depth scaling of linear attention)**, judged on the spectra with a > 0:
#   (a) the power law describes the losses: R² ≥ 0.95 for every spectrum;
#   (b) the measured α lies between the Monte Carlo repeated-update and free-polynomial exponents,
#   α_rep − 2·se ≤ α ≤ α_free + 2·se, for every spectrum;
#   (c) the exponent depends on the spectrum: some pair of spectra differs by more than 3 combined
#   standard errors. Reproduced: all three; partly: (a) and one of (b), (c); not reproduced
#   otherwise. The isotropic spectrum (one layer suffices in the population limit) is reported
#   beside them, against its Monte Carlo references.
# - **C6a (linear attention learns strong modes first)**, on the tracked spectrum:
#   (a) along training, weaker modes are learned later: the rank correlation between the mode
#   index k (0 = largest input variance) and the step at which mode k covered half of its fall is
#   ≥ 0.5, for depth 1 and for the deepest model (seed 0);
#   (b) across depth, weaker modes need more layers: the strongest mode's normalised final loss
#   is below `mode_level` by depth 4, the weakest mode's is not. Reproduced: both; partly: one.

# %%
R2_MIN, SE_BAND, DISTINCT_SE, ORDER_MIN, FEW_LAYERS = 0.95, 2.0, 3.0, 0.5, 4

# %% [markdown]
# ## What the references predict, before any training
# The spectral range λ₁/λ_d of the population and the median range of S over sampled contexts;
# the loss of each reference at every trained depth. The population free polynomial interpolates
# all d eigenvalues, so it is exactly zero from L = d on; the isotropic population references are
# zero at every depth.

# %%
def references(a, b):
    """Both references, population and Monte Carlo at this P, for one spectrum."""
    lam, omega = theory.spectra(s["dim"], a, b)
    cfg = s.config(model="linear", task="easy", input_exponent=a, task_exponent=b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"population": theory.population_references(lam, omega, s["depths"]),
                "mc": theory.mc_references(cfg, s["depths"], n_contexts=s["reference_contexts"])}


refs = {tuple(sp): references(*sp) for sp in s["spectra"]}
ref_rows = [{"spectrum": label(sp), "kind": f"{where} {kind}", **dict(zip(s["depths"], r[where][kind]))}
            for sp, r in refs.items() for where in ("population", "mc") for kind in ("repeated", "free")]
nb.save_table(s, pd.DataFrame(ref_rows), "reference_losses")
pd.DataFrame(ref_rows).set_index(["spectrum", "kind"]).map(lambda v: f"{v:.3g}")

# %% [markdown]
# ## Runs
# Every depth of a (spectrum, seed) pair trains in one batched pass (`icl.train`); the mode-wise
# probe (teachers along single eigen-directions, M3) is recorded along training for one spectrum.
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
# L^0.5. Even so the deep models are not trained to their plateau: most of them still fall by more
# than 1 % over the last 20 % of training (hollow points in the figures), so their losses are upper
# bounds.

# %%
cfgs = [c.replace(track_modes=[c.input_exponent, c.task_exponent] == mode_spec,
                  learning_rate=s["learning_rate"] * c.depth ** s["lr_depth_exponent"])
        for c in s.grid(s["depths"], s["seeds"], s["spectra"], model="linear", task="easy")]
runs = s.run(cfgs)
df = nb.losses_frame(runs).assign(diverged=[r["final_loss"] > r["initial_loss"] for r in runs])
nb.save_table(s, df, "losses")
df.pivot_table(index=["input_exponent", "task_exponent"], columns="depth", values="loss").map(lambda v: f"{v:.4g}")

# %% [markdown]
# ## Training curves
# Every depth must reach its plateau before its final loss means anything (hollow circles in the
# loss-against-depth figure mark runs that did not). Both seeds are drawn.

# %%
curves_png = nb.save_figure(s, plots.curve_panels({label(sp): runs_of(runs, sp) for sp in s["spectra"]}, 7),
                             "training_curves")
means = df[~df.diverged].groupby(["input_exponent", "task_exponent", "depth"]).loss.mean().unstack("depth")
rises = {label(k): [int(L) for L, a, b in zip(means.columns[1:], row.values[1:], row.values[:-1]) if a > b]
         for k, row in means.iterrows()}
print("converged:", int(df.converged.sum()), "of", len(df), "| diverged:", int(df.diverged.sum()),
      "| depths whose mean loss is above the next shallower one:", rises)

# %% [markdown]
# ## C1: loss against depth, with both references (paper §3.1, A.2)
# Points: mean over seeds with their standard error; line: the fitted power law. Dashed: repeated
# update, dotted: free polynomial (colour: Monte Carlo at this P; grey: population limit).

# %%
parts = {(a, b): df[(df.input_exponent == a) & (df.task_exponent == b) & ~df.diverged] for a, b in s["spectra"]}
fits = {sp: tables.fit_depths(part, L0=0.0) for sp, part in parts.items()}

# %%
fig, axes = plt.subplots(1, len(s["spectra"]), figsize=(3.6 * len(s["spectra"]), 3.4), squeeze=False)
for ax, sp in zip(axes[0], s["spectra"]):
    part = parts[tuple(sp)]
    plots.loss_vs_depth(ax, part, "trained", color=plots.COLORS[0], fit=fits[tuple(sp)])
    r = refs[tuple(sp)]
    for kind, ls in (("repeated", "--"), ("free", ":")):
        ax.plot(s["depths"], np.where(r["mc"][kind] > 0, r["mc"][kind], np.nan), ls, color=plots.COLORS[1], label=f"MC {kind}")
        ax.plot(s["depths"], np.where(r["population"][kind] > 0, r["population"][kind], np.nan), ls, color="grey", lw=1,
                label=f"population {kind}")
    ax.set_ylim(max(1e-6, 0.3 * part.loss.min()), 2 * max(part.loss.max(), r["mc"]["repeated"][0]))
    ax.set_title(label(sp), fontsize=9)
    if ax is not axes[0, 0]:
        ax.set_ylabel("")
axes[0, 0].legend(fontsize=6)
depth_png = nb.save_figure(s, fig, "loss_vs_depth")

# %% [markdown]
# ## C1: the exponents (Table 2 in our numbers)

# %%
def exponent_row(sp):
    f, r = fits[tuple(sp)], refs[tuple(sp)]
    e = {name: tables.reference_exponent(r[where][kind], s["depths"]) for name, (where, kind) in
         {"rep_mc": ("mc", "repeated"), "free_mc": ("mc", "free"),
          "rep_pop": ("population", "repeated"), "free_pop": ("population", "free")}.items()}
    row = {"spectrum": label(sp), "input_exponent": sp[0], "task_exponent": sp[1],
           "range_population": r["population"]["range_population"], "range_context_median": r["mc"]["range_empirical_median"],
           "alpha": f.alpha, "alpha_se": f.alpha_se, "c": f.c, "r2": f.r2}
    row.update({f"alpha_{k}": v for k, v in e.items()})
    row["between"] = bool(row["alpha_rep_mc"] - SE_BAND * f.alpha_se <= f.alpha <= row["alpha_free_mc"] + SE_BAND * f.alpha_se)
    return row


table2 = pd.DataFrame([exponent_row(sp) for sp in s["spectra"]])
nb.save_table(s, table2, "table2_exponents")
table2.drop(columns=["input_exponent", "task_exponent"]).round(3)

# %% [markdown]
# ## A.1: the trained model is a covariance polynomial
# Read the preconditioners Γ_l and the readout off the deepest trained model of the tracked
# spectrum, build M(S) for every held-out context, and predict x_qᵀ M(S) S w: its loss must equal
# the model's own evaluation loss. How isotropic the learned Γ_l are: the share of each Γ_l's
# Frobenius norm that lies along the identity (1 for Γ_l ∝ I), averaged over layers.

# %%
deep = runs_of(runs, mode_spec, depth=max(s["depths"]), seed=s["seeds"][0])[0]
gammas, readout, scale = modes.polynomial_of(deep)
ev = held_out(s.config(**{k: deep["config"][k] for k in ("model", "task", "input_exponent", "task_exponent")}),
              torch.device("cpu"))
x, xq, w, target = (t.double().numpy() for t in (ev.x, ev.xq, ev.teacher, ev.target))
poly_pred = modes.polynomial_predictions(gammas, readout, x, xq, w, scale)
poly_loss = float(np.mean((poly_pred - target) ** 2) / np.mean(target**2))
isotropy = float(np.mean([abs(np.trace(g)) / np.sqrt(len(g)) / np.linalg.norm(g) for g in gammas]))
pd.Series({"model's evaluation loss": deep["final_loss"], "polynomial's loss, same contexts": poly_loss,
           "relative difference": abs(poly_loss / deep["final_loss"] - 1), "isotropy of Γ_l": isotropy})

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
for r in sorted(runs_of(runs, mode_spec, seed=s["seeds"][0]), key=lambda r: r["config"]["depth"]):
    g, rd, sc = modes.polynomial_of(r)
    line = ax.plot(grid, modes.effective_polynomial(g, rd, grid, sc), lw=1.2, label=f"L = {r['config']['depth']}")
    gains[r["config"]["depth"]] = modes.mode_gains(g, rd, lam_sphere, sc, n_rotations=32)
    ax.plot(lam_sphere, gains[r["config"]["depth"]], "o", ms=3, color=line[0].get_color())
ax.axvspan(*np.percentile(s_eigs, [5, 95]), color="grey", alpha=0.1)
ax.plot(lam_sphere, np.full_like(lam_sphere, -0.05), "|", color="k", ms=8)
ax.axhline(1, color="k", lw=0.8)
ax.set(xscale="log", xlabel="eigenvalue λ", ylabel="λ·p(λ)", ylim=(-0.2, 1.8), title=f"trained polynomials, {label(mode_spec)}")
ax.legend(fontsize=7, ncol=2)
poly_png = nb.save_figure(s, fig, "covariance_polynomial")
pd.DataFrame({"gain, strongest mode": {L: v[0] for L, v in gains.items()},
              "gain, weakest mode": {L: v[-1] for L, v in gains.items()}}).rename_axis("depth").round(3)

# %% [markdown]
# ## C6a: which modes are learned first (paper §3.1; Fig. 7's linear half)
# Probe teachers along single eigen-directions, w = O_c e_k, give a loss per mode; dividing by its
# value at initialisation puts every mode on one scale. Colour: mode index k (dark = largest input
# variance). If strong directions are learned first the dark curves fall first.

# %%
tracked = {L: runs_of(runs, mode_spec, depth=L) for L in s["depths"]}
shown = [min(s["depths"]), max(s["depths"])]
fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
order, spread, half = {}, {}, {}
for ax, L in zip(axes, shown):
    steps_, norm = modes.normalised_mode_curves(tracked[L][0])
    half[L] = modes.half_fall_steps(steps_, norm)
    order[L], spread[L] = modes.learning_order(half[L]), modes.collapse_spread(norm)
    cmap = plt.get_cmap("viridis", norm.shape[1])
    for k in range(norm.shape[1]):
        ax.plot(np.maximum(steps_, 1), norm[:, k], color=cmap(k), lw=1)
    ax.set(xscale="log", yscale="log", xlabel="training step", title=f"L = {L}: order {order[L]:.2f}, spread {spread[L]:.2f}")
axes[0].set_ylabel("loss_k(t) / loss_k(0)")
modes_png = nb.save_figure(s, fig, "mode_curves")
pd.DataFrame({"learning order (rank corr.)": order, "spread (decades)": spread,
              "half-fall step, strongest mode": {L: h[0] for L, h in half.items()},
              "half-fall step, weakest mode": {L: h[-1] for L, h in half.items()}})

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
finals = np.array([np.mean([modes.normalised_mode_curves(r)[1][-1] for r in tracked[L]], axis=0) for L in s["depths"]])
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4), sharey=True)
cmap = plt.get_cmap("viridis", len(lam_sphere))
for k in range(len(lam_sphere)):
    axes[0].plot(dense, residuals[:, k], color=cmap(k), lw=0.8)
    axes[1].plot(s["depths"], finals[:, k], "o-", color=cmap(k), lw=0.8, ms=2)
axes[0].plot(dense, residuals @ weights, "k-", lw=2, label="weighted sum (the loss)")
axes[1].plot(s["depths"], means.loc[tuple(mode_spec)].values, "k-", lw=2, label="relative loss")
for ax, title in zip(axes, ("repeated update, per mode", "trained, per mode")):
    ax.axhline(s["mode_level"], color="grey", ls="--", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="depth L", title=title)
    ax.set_xscale("log", base=2)
axes[0].set_ylabel("loss_k / loss_k(no model)")
axes[0].set_ylim(1e-4, 2)
axes[0].legend(fontsize=7)
a4_png = nb.save_figure(s, fig, "modes_vs_depth")

# %% [markdown]
# The depth at which each mode first drops below `mode_level`: trained (smallest trained depth)
# against the repeated-update reference (smallest integer depth), by the mode's variance λ_k.

# %%
conv_trained = modes.trained_convergence_depths(s["depths"], finals, s["mode_level"])
conv_repeated = modes.convergence_depths(lam_sphere, omega, max_depth=max(s["depths"]), level=s["mode_level"])
conv = pd.DataFrame({"lambda_k": lam_sphere, "trained": conv_trained, "repeated update": conv_repeated})
nb.save_table(s, conv.assign(k=np.arange(len(conv))), "mode_convergence_depths")
conv.T.round(2)

# %% [markdown]
# ## Verdicts

# %%
judged = table2[table2.input_exponent > 0]
z = lambda i, j: abs(judged.alpha.iloc[i] - judged.alpha.iloc[j]) / np.hypot(judged.alpha_se.iloc[i], judged.alpha_se.iloc[j])
separation = max((z(i, j) for i in range(len(judged)) for j in range(i + 1, len(judged))), default=0.0)
c1 = {"power law": bool((judged.r2 >= R2_MIN).all()) if len(judged) else False,
      "between references": bool(judged.between.all()) if len(judged) else False,
      "depends on spectrum": bool(separation > DISTINCT_SE)}
c6 = {"strong modes first (training)": bool(min(order.values()) >= ORDER_MIN),
      "weak modes need depth": bool(conv_trained[0] <= FEW_LAYERS < conv_trained[-1])}
c1_status = claims.verdict(c1, "power law", plus_one=True)
c6_status = claims.verdict(c6)
exps = {r.spectrum: {"alpha": r.alpha, "se": r.alpha_se, "rep_mc": r.alpha_rep_mc, "free_mc": r.alpha_free_mc}
        for r in table2.itertuples()}
claims.claim(s, "C1", "Linear attention on the easy task: the loss falls with depth as a power law whose exponent depends "
         "on the spectra and lies between the repeated-update and free-polynomial references.", c1_status,
         {"exponents": exps, "largest separation (se)": separation, "converged": bool(df.converged.all()),
          "diverged runs": int(df.diverged.sum()), **c1},
         depth_png, f"R2 >= {R2_MIN}; alpha_rep - {SE_BAND} se <= alpha <= alpha_free + {SE_BAND} se (Monte Carlo "
         f"references, same depths); some pair of spectra {DISTINCT_SE} combined se apart; spectra with a > 0")
claims.claim(s, "C6a", "Linear attention learns strong modes first: along training and across depth, weak modes lag.",
         c6_status, {"spectrum": mode_spec, "learning order": {f"L={L}": v for L, v in order.items()},
                     "spread": {f"L={L}": v for L, v in spread.items()},
                     "convergence depth strongest/weakest": [conv_trained[0], conv_trained[-1]], **c6}, modes_png,
         f"rank correlation(mode index, half-fall step) >= {ORDER_MIN} at depth 1 and the deepest; strongest mode below "
         f"{s['mode_level']} by depth {FEW_LAYERS}, weakest not")
nb.write_results(s, {"exponents": table2.drop(columns=["spectrum"]).to_dict("records"), "polynomial_loss": poly_loss,
                     "model_loss": deep["final_loss"], "gamma_isotropy": isotropy, "learning_order": order,
                     "collapse_spread": spread, "convergence_trained": conv_trained.tolist(),
                     "convergence_repeated": conv_repeated.tolist(), "c1": c1, "c6a": c6, "separation": separation,
                     "rises": rises, "figures": [curves_png, depth_png, poly_png, modes_png, a4_png]})

# %%
# NBVAL_CHECK_OUTPUT
nb.show({"alpha per spectrum": table2.alpha.tolist(), "alpha se": table2.alpha_se.tolist(),
         "alpha repeated (MC)": table2.alpha_rep_mc.tolist(), "alpha free (MC)": table2.alpha_free_mc.tolist(),
         "polynomial / model loss": poly_loss / deep["final_loss"], "learning order": list(order.values()),
         "convergence depth strongest, weakest": [v if np.isfinite(v) else "never" for v in (conv_trained[0], conv_trained[-1])]})
nb.show({**c1, **c6})
claims.show_claims(s)

# %% [markdown]
# **What the quick profile shows.** For every spectrum the loss falls with depth as a clean power
# law (R² 0.95–0.996), and the exponent depends on the spectrum: 1.33 for isotropic inputs, 1.09
# for (1, 1), 0.94 for (1.5, 0.5) and 0.69 for (2, 0); steeper input spectra scale more slowly with
# depth, as A.2 predicts. Only (2, 0) lies between the two references, though. For (1, 1) and
# (1.5, 0.5) the trained exponent is *below* the repeated-update reference (1.71 and 1.07), which a
# model with its own preconditioner in every layer should at least match. With the 2,000-step
# budget of `docs/training_protocol.md` (section 7) no run diverged, but 27 of the 48 runs, mostly
# the deep ones and every isotropic one, still fall by more than 1 % over their last 20 % of
# training (hollow points). Their losses are upper bounds, and the measured exponents probably
# underestimate what longer training would give; faster rates diverged within twice the budget, so
# the `paper` profile's longer training is the next thing to try. A.1 holds exactly: the trained
# model *is* its covariance polynomial (same loss to float precision). Mode by mode, weak modes need
# depth: the strongest mode is learned at depth 1, the tenth at 32, and the weakest 22 not within
# 32 layers, close to the repeated-update reference (whose eleventh mode converges at depth 30).
# But along training the one-layer model does not learn its strong modes first (rank correlation
# −0.31), while the 32-layer model does (0.82): C6a is only partly reproduced.
