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
# batched pass on the same data stream; the run cache makes re-runs free. Steps, learning rate,
# initialisation and `key_dim` follow the measurements of `docs/training_protocol.md`.
#
# Claims judged here: C3 (linear plateau), C4 (softmax ≈ 1/L), C5 (ensemble decomposition),
# C6b (mode-wise learning, softmax half of C6), C9 (token selection), C10 (other spectra, top-16).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from icl import claims, modes
from icl import notebook as nb
from icl import plots, tables, theory
from icl.sweep import runs_of

plots.style()

# %% tags=["parameters"]
profile = "quick"  # which params/<profile>/ file these values came from (informational)
output_dir = "outputs/03_difficult"  # figures, tables, results.json (relative to the repo root)
cache_dir = "outputs/runs"  # run cache; None trains afresh into a temporary folder
device = "auto"
threads = 0  # torch CPU threads; 0 keeps torch's default
progress = True
dim = 16
context_length = 64
key_dim = 4  # rank of every layer's query/key matrices; 0 means: the same as dim
steps = 2000
batch_size = 256
learning_rate = 0.003
init_scale = 1.0
eval_contexts = 2048
top_k = 2  # the main task: mean label of the top-2 tokens
depths = [1, 2, 4, 8, 16, 32, 64]  # softmax depths of the main sweep
seeds = [0]  # seeds of every spectrum of the main sweep
first_spectrum_seeds = [0, 1]  # the first spectrum gets these seeds instead (error bars over seeds)
spectra = [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]  # [input_exponent, task_exponent]; the first one is
# also used for the key_dim comparison and the token-selection percentiles
linear_depths = [1, 2, 3, 4, 6, 8]
linear_learning_rate = 0.003
linear_key_dim = 0  # rank of the linear model's Q, K; 0 means full rank, the preconditioners of A.1
compare_key_dim = 0  # key_dim of the comparison sweep on the first spectrum; 0 means: the same as dim
mode_spectrum = [1.0, 0.0]  # spectrum of the mode-wise curves (C6b); the first spectrum if not in `spectra`
mode_eval_points = 200  # evaluations along training for that spectrum (modes are learned early)
joint_spectra = [[1.0, 1.0], [1.5, 0.5]]  # both exponents nonzero (C10), one seed
wide_top_k = 16  # the flatter aggregation task of C10
wide_spectra = [[0.0, 0.0], [1.0, 1.0]]
extra_depths = [1, 2, 4, 8, 16, 32]  # depths of the joint-spectrum and wide-top-k sweeps
mc_contexts = 20000  # contexts of the Monte Carlo linear floor (A.3)
input_exponent = None  # set both (papermill -p) to run one custom spectrum instead of `spectra`
task_exponent = None
nb.end_of_parameters(globals())

# %%
s = nb.parameters(globals())
first = s["spectra"][0]
mode_spectrum = s["mode_spectrum"] if s["mode_spectrum"] in s["spectra"] else first

# %% [markdown]
# ## Verdict criteria (written before the runs)
#
# Loss means the relative loss R_L = E[(ŷ − y*)²] / E[y*²] on held-out contexts; fits are
# R_L = L0 + c·L^(−α) with the floor fitted jointly, in log space, on the mean over seeds (§D.1).
#
# - **C4 (softmax, top-2)** — for every spectrum: (a) the loss falls with depth (R at the deepest
#   depth below 0.9·R_1); (b) |α − 1| ≤ 0.25; (c) the floor L0 is below 0.7 × the linear plateau.
#   Reproduced: all three for every spectrum; partly: (a) everywhere but (b) or (c) fails
#   somewhere; not reproduced: (a) fails.
# - **C3 (linear, top-2)** — for every spectrum: (a) the plateau is reached by depth 2 (R_2 within
#   5 % of the best linear loss); (b) the best linear loss is within 10 % of the Monte Carlo
#   irreducible loss of A.3 (best predictor ∝ Σ_c x_q). Reproduced: both; partly: one.
# - **C5 (decomposition)** — (a) R = C + (A − C)/L holds to 1e-6 for every softmax model; (b) for every
#   top-2 spectrum, L0 − C_L > 0 at every depth and its fitted exponent γ satisfies |γ − 1| ≤ 0.25;
#   (c) the disagreement A_L − C_L approaches a constant: its log-log slope over the deeper half of
#   the depths is within ±0.25, so (A_L − C_L)/L carries the ~1/L gain. Reproduced: all; partly: (a)
#   and one of (b), (c).
# - **C6b (mode-wise learning)** — spread = the standard deviation across modes of
#   log10(loss_k(t)/loss_k(0)), averaged over the checkpoints after t = 0 (0 means the normalised
#   curves coincide). Reproduced: the softmax spread (depth 1 and the deepest) is below 0.5 × the
#   linear spread (depth 1 and the deepest linear model) and the linear model's strongest mode
#   reaches half of its total fall (linear scale) earlier in training than its weakest; partly:
#   only one of the two.
# - **C9 (token selection)** — per context, the total-variation distance between the layer-averaged
#   attention and the target weights. Reproduced: the deepest model's 90th and 99th percentiles
#   are at most 0.9 × depth 1's, and depth 1 is lower at the 1st percentile; partly: only the
#   upper-tail cut.
# - **C10 (other spectra, top-16)** — (a) every jointly nonzero top-2 spectrum and every top-16
#   spectrum loses at least 10 % from depth 1 to the deepest; (b) every jointly nonzero top-2 fit
#   has |α − 1| ≤ 0.25; (c) the mean |α − 1| of the top-16 fits exceeds that of all top-2 fits.
#   Reproduced: all; partly: (a) and one of (b), (c); not reproduced: (a) fails.

# %%
ALPHA_TOL, FLOOR_RATIO, DEPTH_FALL = 0.25, 0.7, 0.9
LINEAR_SETTLE, MC_TOL = 0.05, 0.10
IDENTITY_TOL, GAMMA_TOL, DISAGREE_SLOPE = 1e-6, 0.25, 0.25
COLLAPSE_RATIO, TAIL_CUT = 0.5, 0.9


# %% [markdown]
# ## The runs
# The main softmax sweep (every spectrum, depths up to the deepest; the first spectrum with more
# seeds), the linear model on the same spectra, the comparison sweep with full-rank query/key
# matrices on the first spectrum, and the two smaller sweeps of C10 (one seed). Mode-wise losses
# are recorded along training for `mode_spectrum`, at finer intervals (`mode_eval_points`).

# %%
base = dict(task="difficult", top_k=s["top_k"])
track = lambda cfgs: [c.replace(track_modes=True, eval_points=s["mode_eval_points"])
                      if [c.input_exponent, c.task_exponent] == mode_spectrum else c for c in cfgs]
main = s.run(track(s.grid(s["depths"], s["first_spectrum_seeds"], [first], model="softmax", **base)
                   + s.grid(s["depths"], s["seeds"], s["spectra"][1:], model="softmax", **base)))
linear = s.run(track(s.grid(s["linear_depths"], s["seeds"][:1], s["spectra"], model="linear",
                            learning_rate=s["linear_learning_rate"], key_dim=s["linear_key_dim"], **base)))
wide_key = s.run(s.grid(s["depths"], s["seeds"][:1], [first], model="softmax", key_dim=s["compare_key_dim"], **base))
joint = s.run(s.grid(s["extra_depths"], s["seeds"][:1], s["joint_spectra"], model="softmax", **base))
wide = s.run(s.grid(s["extra_depths"], s["seeds"][:1], s["wide_spectra"], model="softmax", task="difficult",
                    top_k=s["wide_top_k"]))
frames = {name: nb.losses_frame(rs) for name, rs in
          dict(main=main, linear=linear, wide_key=wide_key, joint=joint, wide=wide).items()}
df = pd.concat([f.assign(sweep=name) for name, f in frames.items()], ignore_index=True)
nb.save_table(s, df, "losses")
df.pivot_table(index=["sweep", "model", "top_k", "key_dim", "input_exponent", "task_exponent"], columns="depth",
               values="loss").round(4)

# %% [markdown]
# ## Training curves
# Every model must have reached its plateau before its final loss is compared across depths.
# A run whose evaluation loss still fell by more than 1 % over the last 20 % of training is marked
# not converged (hollow black circle in the loss-versus-depth figures).

# %%
label = lambda spec, extra="": plots.spectrum_label(*spec) + extra
panels = lambda groups, name: nb.save_figure(s, plots.curve_panels(groups), name)
curves = {"softmax": panels({label(p): runs_of(main, p) for p in s["spectra"]}, "curves_softmax"),
          "linear": panels({label(p, ", linear"): runs_of(linear, p) for p in s["spectra"]}, "curves_linear")}

# %%
curves["extra"] = panels({
    label(first, f", key_dim {s.config(key_dim=s['compare_key_dim']).resolved_key_dim}"): wide_key,
    **{label(p): runs_of(joint, p) for p in s["joint_spectra"]},
    **{label(p, f", top-{s['wide_top_k']}"): runs_of(wide, p) for p in s["wide_spectra"]}}, "curves_extra")
not_converged = df[~df.converged][["sweep", "model", "input_exponent", "task_exponent", "depth", "seed", "plateau"]]
not_converged

# %% [markdown]
# A deeper model that ends above a shallower one would point at its training, not at depth
# (docs/training_protocol.md). The largest such excess in each sweep (0 when the loss never rises with depth):

# %%
rise = lambda g: max([0.0] + [g.loss.iloc[j] - g.loss.iloc[i] for i in range(len(g)) for j in range(i + 1, len(g))])
inversions = (df.sort_values("depth").groupby(["sweep", "model", "top_k", "input_exponent", "task_exponent", "seed"])
              [["loss"]].apply(rise).rename("largest rise with depth").reset_index())
inversions.round(4)

# %% [markdown]
# ## C3: the linear model settles within a layer or two, on the Monte Carlo floor (A.3)
# The linear model's prediction is linear in the context labels with weights linear in the inputs.
# Appendix A.3's argument: the part of the target it can predict is proportional to Σ_c x_q, so the
# rest is an irreducible loss that a Monte Carlo over contexts computes from the spectra alone
# (`theory.linear_floor_mc`, on the very sampler the models train on). The second estimate uses the
# context's empirical covariance instead of Σ_c.

# %%
floors = []
for a, b in s["spectra"]:
    cfg = s.config(task="difficult", model="linear", input_exponent=a, task_exponent=b, key_dim=s["linear_key_dim"])
    pop = theory.linear_floor_mc(cfg, n_contexts=s["mc_contexts"])
    emp = theory.linear_floor_mc(cfg, n_contexts=s["mc_contexts"], covariance="empirical")
    lin = frames["linear"].query("input_exponent == @a and task_exponent == @b").groupby("depth").loss.mean()
    floors.append({"input_exponent": a, "task_exponent": b, "linear_R_1": lin.iloc[0], "linear_R_2": lin.loc[2]
                   if 2 in lin.index else np.nan, "linear_best": lin.min(), "mc_floor": pop["loss"],
                   "mc_floor_se": pop["se"], "mc_floor_empirical": emp["loss"]})
table3 = pd.DataFrame(floors)
table3["relative_gap"] = (table3.linear_best - table3.mc_floor) / table3.mc_floor
nb.save_table(s, table3, "table3_linear_floor")
table3.round(4)

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
for i, ((a, b), part) in enumerate(frames["linear"].groupby(["input_exponent", "task_exponent"])):
    plots.loss_vs_depth(ax, part, label((a, b)), color=plots.COLORS[i])
    ref = table3.set_index(["input_exponent", "task_exponent"]).loc[(a, b)]
    ax.axhline(ref.mc_floor, color=plots.COLORS[i], ls="--", lw=1)
    ax.axhline(ref.mc_floor_empirical, color=plots.COLORS[i], ls=":", lw=1)
ax.set_title(f"linear attention, top-{s['top_k']} (Monte Carlo floors: dashed Σ_c, dotted S)", fontsize=9)
ax.legend(fontsize=7)
linear_png = nb.save_figure(s, fig, "linear_vs_depth")

# %% [markdown]
# **What the quick profile shows.** The full-rank linear model reaches its plateau by the second
# layer. That plateau lies 11–13 % *below* the Monte Carlo floor built on the population covariance
# Σ_c. It agrees much better with the version built on the context's own covariance S: one layer
# gives 0.514 against 0.516 on the isotropic spectrum, and deeper models go a few per cent lower.
# The reason is the target. S x_q = (1/P) Σ_μ x_μ (x_μ · x_q) already weights every context token,
# the top-k tokens included, by its similarity to the query, while Σ_c x_q knows nothing about the
# sampled tokens, and powers of S sharpen that weighting a little further. A.3's argument (a floor
# set by the best predictor of the form matrix × x_q) holds here with S in place of Σ_c. The
# criterion above names Σ_c, so the match part of C3 is judged against Σ_c.

# %% [markdown]
# ## C4: softmax loss against depth (Table 1 in our numbers)
# Points: mean over seeds with their standard error; lines: the joint-floor fits; dotted: the
# linear plateau of the same spectrum.

# %%
table1 = tables.fit_table(frames["main"], tables.SPECTRUM).merge(table3[["input_exponent", "task_exponent", "linear_best"]])
table1["floor_ratio"] = table1.L0 / table1.linear_best
nb.save_table(s, table1, "table1_softmax_fits")
fig, ax = plt.subplots(figsize=(5.5, 4))
plots.depth_figure(ax, frames["main"])
for i, plateau in enumerate(table1.linear_best):
    ax.axhline(plateau, color=plots.COLORS[i], ls=":", lw=1)
ax.set_title(f"softmax attention, top-{s['top_k']}, key_dim {s.config().resolved_key_dim} (dotted: linear plateau)", fontsize=9)
softmax_png = nb.save_figure(s, fig, "softmax_vs_depth")
table1.round(4)

# %% [markdown]
# **What the quick profile shows.** Every spectrum falls with depth, and no deeper model ends
# above a shallower one. The joint-floor fits are good (R² ≈ 0.98). The exponents, though, are
# 0.7–0.8 for two of the three spectra, and every floor is 0.75–0.85 × the linear plateau, not
# the clear gap the paper reports. Most of the fall happens by L = 4 = dim / key_dim. The next
# section shows why that depth stands out.

# %% [markdown]
# ## The regime: low-rank against full-rank query/key matrices
# The prototype measurements that started this project found the depth curve flat when every layer's query/key matrices have full
# rank (key_dim = dim), and falling when they are low-rank. The same comparison on this notebook's
# settings, first spectrum only, with the decomposition terms: this is where the claim holds or
# fails, not a detail.

# %%
key_frame = pd.concat([frames["main"].query("input_exponent == @first[0] and task_exponent == @first[1]"),
                       frames["wide_key"]])
table_key = tables.fit_table(key_frame, ["key_dim"])
nb.save_table(s, table_key, "key_dim_fits")
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
plots.depth_figure(axes[0], key_frame, by=("key_dim",), name=lambda k: f"key_dim {k[0]}")
for i, (kd, part) in enumerate(key_frame.groupby("key_dim")):
    for term, ls in (("A_L", "--"), ("C_L", ":")):
        m = part.groupby("depth")[term].mean()
        axes[1].plot(m.index, m.values, ls, marker=".", color=plots.COLORS[i], label=f"{term}, key_dim {kd}")
axes[1].set(xscale="log", yscale="log", xlabel="depth L", ylabel="decomposition term")
axes[1].legend(fontsize=7)
key_png = nb.save_figure(s, fig, "key_dim_comparison")
table_key.round(4)

# %% [markdown]
# **What the quick profile shows.** With full-rank query/key matrices the curve is flat (about
# 0.196 at every depth; the fit has no meaning). That single full-rank layer is already 2.6× below
# the linear plateau and better than the deepest rank-4 model. So in this regime a nonlinear
# floor far below the linear one needs no depth at all, and the depth gain of C4 is a gain of
# *rank-limited* layers: each layer sees a 4-dimensional projection of the inputs, and averaging
# layers recovers what one full layer sees. The full-rank model's A_L grows with depth just as
# fast as the 1/L factor shrinks it, so there is nothing to gain. `docs/training_protocol.md`
# holds the measurements behind these settings (learning rates, steps, initialisation) and the
# settings that were rejected.

# %% [markdown]
# ## C5: the ensemble decomposition (Appendix B, Table 5)
# With per-layer predictors g_l (their mean is the prediction) and errors e_l = g_l − y*:
# A_L = mean_l E[e_l²], C_L = mean over l ≠ l' of E[e_l e_l'], and exactly R_L = C_L + (A_L − C_L)/L.
# If the shared error C_L tends to the floor and the disagreement A_L − C_L to a constant, the
# loss falls as 1/L. The gap L0 − C_L is fitted as a pure power law with L0 from the loss fit.

# %%
top2 = pd.concat([frames["main"], frames["joint"]])
floors_l0 = tables.fit_table(top2, tables.SPECTRUM)
identity = max(r["decomposition"]["identity_error"] for r in main + joint + wide + wide_key)
table5 = tables.gap_table(top2, floors_l0, tables.SPECTRUM)
nb.save_table(s, table5, "table5_shared_error")
table5.round(4)

# %%
specs = [tuple(p) for p in s["spectra"]] + [tuple(p) for p in s["joint_spectra"]]
fig, axes = plt.subplots(1, len(specs), figsize=(3.2 * len(specs), 3.2), squeeze=False)
for ax, (a, b) in zip(axes[0], specs):
    m = top2.query("input_exponent == @a and task_exponent == @b").groupby("depth")[["loss", "A_L", "C_L"]].mean()
    ax.plot(m.index, m.A_L, "s--", ms=4, label="A_L (individual)")
    ax.plot(m.index, m.C_L, "^:", ms=4, label="C_L (shared)")
    ax.plot(m.index, m.loss, "o-", ms=4, label="R_L (loss)")
    ax.axhline(floors_l0.set_index(tables.SPECTRUM).loc[(a, b), "L0"], color="grey", lw=1, ls="-.", label="fitted floor L0")
    ax.axhline(0, color="k", lw=0.5)
    ax.set(xscale="log", xlabel="depth L", title=label((a, b)))
axes[0, 0].set_ylabel("relative error (C_L can be negative)")
axes[0, 0].legend(fontsize=7)
decomp_png = nb.save_figure(s, fig, "decomposition")

# %% [markdown]
# **What the quick profile shows.** The identity holds to float64 rounding. The shared error is
# not a smooth approach to the floor: in every spectrum C_L dips to its minimum at L = 4 =
# dim / key_dim (it is even negative for the jointly nonzero spectra). There the few layers split
# the input directions between them and their errors anti-correlate. After the dip, C_L rises
# towards the fitted floor from below. Where C_2 lies above L0 the gap L0 − C_L has no power law,
# and elsewhere γ is far from one with a poor R². The disagreement A_L − C_L keeps growing slowly
# (slopes 0.03–0.23), and A_L reaches 1–3 × E[y*²]: single layers are poor predictors whose errors
# largely cancel in the mean.

# %% [markdown]
# ## C6b: mode-wise learning, softmax against linear (paper Fig. 7)
# Probing with teachers along single eigen-directions of the context (w = O_c e_k) gives a loss
# per mode; dividing by its value at initialisation puts all modes on one scale. If strong and weak
# modes are learned at the same rate the normalised curves lie on top of each other. Colour: mode
# index k (dark = largest input and task variance).

# %%
pick = lambda runs, L: runs_of(runs, mode_spectrum, depth=L, seed=s["seeds"][0])[0]
probes = {f"softmax L={L}": pick(main, L) for L in (min(s["depths"]), max(s["depths"]))}
probes.update({f"linear L={L}": pick(linear, L) for L in (min(s["linear_depths"]), max(s["linear_depths"]))})
spread = {}
fig, axes = plt.subplots(1, len(probes), figsize=(3.2 * len(probes), 3), sharey=True)
for ax, (name, r) in zip(axes, probes.items()):
    steps_, norm = modes.normalised_mode_curves(r)
    spread[name] = modes.collapse_spread(norm)
    cmap = plt.get_cmap("viridis", norm.shape[1])
    for k in range(norm.shape[1]):
        ax.plot(np.maximum(steps_, 1), norm[:, k], color=cmap(k), lw=1)
    ax.set(xscale="log", yscale="log", xlabel="training step", title=f"{name}: spread {spread[name]:.3f}")
axes[0].set_ylabel("loss_k(t) / loss_k(0)")
modes_png = nb.save_figure(s, fig, "mode_curves")
half = {name: modes.half_fall_steps(*modes.normalised_mode_curves(r)) for name, r in probes.items()}
pd.DataFrame({"spread": spread, "half-fall step, strongest mode": {k: v[0] for k, v in half.items()},
              "half-fall step, weakest mode": {k: v[-1] for k, v in half.items()}})

# %% [markdown]
# **What the quick profile shows.** On this spectrum neither model's normalised curves collapse.
# In both models the modes with the largest input variance (dark) fall furthest, and the spread
# comes from where the modes end more than from how fast they fall. In all four models the
# half-fall steps differ by at most a factor of about 1.5 across modes. One softmax layer learns
# its weakest mode slightly *earlier* than its strongest, while the 64-layer softmax model learns
# the strongest first by as wide a margin as the linear model. So the linear half of the claim
# (strong modes first) holds, and the softmax half (a collapse) does not in this regime.

# %% [markdown]
# ## C9: token selection across contexts (paper Fig. 13)
# For each held-out context, the total-variation distance between the attention averaged over the
# model's layers and the target weights (1/k on the top-k tokens): 0 means the model reads exactly
# the right tokens. Percentiles across contexts, depth 1 against the deepest model (first spectrum).

# %%
sel = {L: [r["token_selection"] for r in runs_of(main, first, depth=L)] for L in (min(s["depths"]), max(s["depths"]))}
pct = {L: np.mean([t["distance"] for t in ts], axis=0) for L, ts in sel.items()}  # mean over seeds
q = np.array(sel[min(s["depths"])][0]["percentile"])
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
for L, v in pct.items():
    axes[0].plot(q, v, label=f"L = {L}")
    axes[1].plot(q, v / pct[min(s["depths"])], label=f"L = {L}")
axes[0].set(xlabel="percentile across contexts", ylabel="token-selection distance (TV)")
axes[1].set(xlabel="percentile across contexts", ylabel="relative to depth 1")
axes[0].legend(fontsize=8)
selection_png = nb.save_figure(s, fig, "token_selection")
at = lambda L, p: float(pct[L][list(q).index(p)])
selection = {f"p{p}": {f"L={L}": at(L, p) for L in pct} for p in (1, 10, 50, 90, 99)}
pd.DataFrame(selection)

# %% [markdown]
# **What the quick profile shows.** The distances are large everywhere (mostly 0.65–0.98 out
# of a maximum of 1): rank-4 softmax attention over 64 tokens stays broad, far from the sharp
# top-2 target. The deepest model shifts the whole distribution down above roughly the 10th
# percentile. Its upper-tail cut (about 9 % at p90, 7 % at p99) is smaller than the 10 % the
# criterion asks for. One layer is better in the lowest tail, as the paper reports.

# %% [markdown]
# ## C10: jointly nonzero spectra and top-16 aggregation (Table 4 in our numbers)

# %%
table4 = pd.concat([tables.fit_table(frames["joint"], tables.SPECTRUM).assign(top_k=s["top_k"]),
                    tables.fit_table(frames["wide"], tables.SPECTRUM).assign(top_k=s["wide_top_k"])], ignore_index=True)
nb.save_table(s, table4, "table4_other_targets")
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
for ax, name, k in ((axes[0], "joint", s["top_k"]), (axes[1], "wide", s["wide_top_k"])):
    plots.depth_figure(ax, frames[name])
    ax.set_title(f"softmax, top-{k}", fontsize=9)
other_png = nb.save_figure(s, fig, "other_targets_vs_depth")
table4.round(4)

# %% [markdown]
# **What the quick profile shows.** Both jointly nonzero top-2 spectra and both top-16 spectra
# fall with depth towards low floors (0.05–0.18), but fitted over depths 1–32 the exponents come
# out *above* one (1.07–1.63, ± 0.25–0.43). Again most of the fall happens by L = 4 and little is
# left after it. Top-16 deviates more from one on average, as the paper says, but the large
# standard errors make that comparison weak.

# %% [markdown]
# ## Verdicts

# %%
fell = lambda t: bool((t.R_deepest < DEPTH_FALL * t.R_1).all())
near_one = lambda t: bool(((t.alpha - 1).abs() <= ALPHA_TOL).all())
c4 = {"falls": fell(table1), "alpha near 1": near_one(table1), "floor below linear": bool((table1.floor_ratio < FLOOR_RATIO).all())}
c3 = {"settled by depth 2": bool((table3.linear_R_2 <= (1 + LINEAR_SETTLE) * table3.linear_best).all()),
      "matches MC floor": bool((table3.relative_gap.abs() <= MC_TOL).all())}
c5 = {"identity": bool(identity < IDENTITY_TOL), "shared error -> floor": bool(table5.gap_positive.all() and
      ((table5.gamma - 1).abs() <= GAMMA_TOL).all()), "disagreement -> constant": bool((table5.disagreement_slope.abs() <= DISAGREE_SLOPE).all())}
soft = [v for k, v in spread.items() if k.startswith("softmax")]
lin = [v for k, v in spread.items() if k.startswith("linear")]
lin_half = [v for k, v in half.items() if k.startswith("linear")]
c6 = {"softmax collapses": bool(max(soft) < COLLAPSE_RATIO * min(lin)), "linear strong first": bool(all(h[0] < h[-1] for h in lin_half))}
dmax, d1 = max(s["depths"]), min(s["depths"])
c9 = {"upper tail cut": bool(at(dmax, 90) <= TAIL_CUT * at(d1, 90) and at(dmax, 99) <= TAIL_CUT * at(d1, 99)),
      "depth 1 better at p1": bool(at(d1, 1) < at(dmax, 1))}
t2, t16 = table4[table4.top_k == s["top_k"]], table4[table4.top_k == s["wide_top_k"]]
dev = lambda t: float((t.alpha - 1).abs().mean())
c10 = {"falls": fell(table4), "joint alpha near 1": near_one(t2), "top-16 deviates more": bool(dev(t16) > dev(pd.concat([table1, t2])))}


# %%
spec_list = lambda t, col: {plots.spectrum_label(a, b): v for a, b, v in zip(t.input_exponent, t.task_exponent, t[col])}
claims.claim(s, "C4", "Softmax attention on the top-2 task keeps improving with depth, with a fitted exponent close to one "
         "for every spectrum and a floor well below the linear plateau.", claims.verdict(c4, "falls"),
         {"alpha": spec_list(table1, "alpha"), "alpha_se": spec_list(table1, "alpha_se"), "L0": spec_list(table1, "L0"),
          "floor / linear plateau": spec_list(table1, "floor_ratio"), "r2": spec_list(table1, "r2"),
          "all converged": bool(frames["main"].converged.all()), **c4}, softmax_png,
         f"R_deepest < {DEPTH_FALL} R_1, |alpha - 1| <= {ALPHA_TOL}, L0 < {FLOOR_RATIO} x linear plateau, every spectrum")
claims.claim(s, "C3", "Linear attention on the top-2 task settles within one or two layers on a spectrum-dependent "
         "plateau that matches the Monte Carlo irreducible loss.", claims.verdict(c3),
         {"linear plateau": spec_list(table3, "linear_best"), "MC floor": spec_list(table3, "mc_floor"),
          "relative gap": spec_list(table3, "relative_gap"), **c3}, linear_png,
         f"R_2 within {LINEAR_SETTLE:.0%} of the best linear loss; best within {MC_TOL:.0%} of the MC floor")

# %%
claims.claim(s, "C5", "The ensemble decomposition holds exactly; the shared error approaches the loss floor as "
         "L^-gamma with gamma near one; the disagreement term gives the 1/L gain.",
         claims.verdict(c5, "identity", plus_one=True),
         {"max identity error": identity, "gamma": spec_list(table5, "gamma"), "gamma_se": spec_list(table5, "gamma_se"),
          "disagreement slope": spec_list(table5, "disagreement_slope"), **c5}, decomp_png,
         f"identity < {IDENTITY_TOL}; L0 - C_L > 0 and |gamma - 1| <= {GAMMA_TOL}; |slope of A - C| <= {DISAGREE_SLOPE}")
claims.claim(s, "C6b", "Softmax attention learns strong and weak modes at similar rates (normalised mode-wise curves "
         "collapse); linear attention learns strong modes first.", claims.verdict(c6),
         {"spread": spread, "spectrum": mode_spectrum, **c6}, modes_png,
         f"softmax spread < {COLLAPSE_RATIO} x linear spread; linear strongest mode reaches half its fall first")
claims.claim(s, "C9", "The deepest model cuts the upper tail of the token-selection loss; one layer is slightly better "
         "in the lowest tail.", claims.verdict(c9, "upper tail cut"), {**selection, **c9}, selection_png,
         f"p90 and p99 of the deepest <= {TAIL_CUT} x depth 1's; depth 1 lower at p1")
claims.claim(s, "C10", "Jointly nonzero spectra (top-2) and top-16 aggregation also decay with depth, with top-16 "
         "exponents further from one.", claims.verdict(c10, "falls", plus_one=True),
         {"alpha top-2 joint": spec_list(t2, "alpha"), "alpha top-16": spec_list(t16, "alpha"),
          "mean |alpha-1| top-16": dev(t16), "mean |alpha-1| top-2": dev(pd.concat([table1, t2])), **c10}, other_png,
         f"R_deepest < {DEPTH_FALL} R_1 everywhere; joint |alpha - 1| <= {ALPHA_TOL}; top-16 mean |alpha - 1| larger")
numbers = {"table1": table1.to_dict("records"), "table3": table3.to_dict("records"), "table4": table4.to_dict("records"),
           "table5": table5.to_dict("records"), "key_dim": table_key.to_dict("records"), "identity_error": identity,
           "mode_spread": spread, "mode_half_fall_steps": {k: v.tolist() for k, v in half.items()},
           "token_selection": selection, "not_converged": not_converged.to_dict("records"),
           "largest_rise_with_depth": inversions.to_dict("records"),
           "checks": {"C3": c3, "C4": c4, "C5": c5, "C6b": c6, "C9": c9, "C10": c10}}
results_path = nb.write_results(s, numbers)

# %% [markdown]
# The fitted numbers (Tables 1, 4 and 5 above, and `results.json`). Fits on few, noisy points are
# ill-conditioned, so the regression check below prints the measured losses instead.

# %%
nb.show({"softmax alpha": table1.alpha.tolist(), "softmax alpha se": table1.alpha_se.tolist(),
         "softmax L0": table1.L0.tolist(), "full-rank alpha": table_key.alpha.tolist()[-1],
         "gamma": table5.gamma.tolist(), "other alpha": table4.alpha.tolist()})

# %%
# NBVAL_CHECK_OUTPUT
nb.show({"softmax R_1": table1.R_1.tolist(), "softmax R_deepest": table1.R_deepest.tolist(),
         "linear plateau": table3.linear_best.tolist(), "MC floor": table3.mc_floor.tolist(),
         "full-rank R_1, R_deepest": table_key[["R_1", "R_deepest"]].values[-1].tolist(),
         "mode spread": list(spread.values()), "token selection p90": [at(L, 90) for L in pct],
         "other R_deepest": table4.R_deepest.tolist(), "identity error < 1e-6": identity < IDENTITY_TOL})
claims.show_claims(s)
