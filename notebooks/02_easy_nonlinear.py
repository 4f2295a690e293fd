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
# # Easy task, nonlinear attention (paper §3.2, claim C2)
#
# **Question.** On the easy task the query is a copy of one context token and the target is that
# token's label. Linear attention can only approach this with a polynomial in the context covariance
# (notebook 01). Can a single *softmax* layer solve it outright, for every input and task spectrum,
# and does it do so by putting (almost) all of its attention on the matching token?
#
# **Setup.** The controlled nonlinear model (paper §2): fixed context labels, one query/key pair per
# layer, one shared value, prediction = mean of the layers' attention-weighted labels. Inputs are
# projected onto the sphere of radius √d (our choice; the paper's summary does not say): the last
# section shows why, by training the same model on raw Gaussian inputs.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from icl import bounds, estimates, grids, plots, runs_of, show_claims, tables
from icl import notebook as nb
from icl.claims import easy as rules

plots.style()

# %% tags=["parameters"]
profile = "quick"  # which params/<profile>/ file these values came from (informational)
output_dir = "outputs/scratch/02_easy_nonlinear"  # a run by hand (git-ignored); icl reproduce: outputs/<profile>/
cache_dir = "outputs/runs"  # run cache; None trains afresh, keeping nothing on disk
device = "auto"
threads = 0  # torch CPU threads; 0 keeps torch's default
progress = True
dim = 16
context_length = 64
key_dim = 0  # 0 means: the same as dim
steps = 3000
batch_size = 256
learning_rate = 0.003
init_scale = 1.0
eval_contexts = 2048
depths = [1, 2, 4]
seeds = [0, 1, 2]
spectra = [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.5, 0.5]]  # [input_exponent, task_exponent]
raw_spectra = [[0.0, 0.0], [1.0, 1.0], [1.5, 0.5]]  # spectra also trained on raw Gaussian inputs
input_exponent = None  # set both (papermill -p) to run one custom spectrum instead of `spectra`
task_exponent = None
nb.end_of_parameters(globals())

# %%
s = nb.parameters(globals())

# %% [markdown]
# ## Verdict criteria (written before the runs)
#
# C2's **core** check is the first (it carries the paper's statement): **not reproduced** when it
# fails, **reproduced** when all four hold, **partly reproduced** when the core holds and another
# does not, **inconclusive** when the core's interval straddles its threshold (since the second
# rerun; before it: reproduced when all four hold, partly when some do; docs/history.md):
# 1. one layer reaches near-zero loss: relative loss below `NEAR_ZERO` for every spectrum;
# 2. depth adds nothing: no deeper model's loss is below `DEEPER_MIN` × the one-layer loss (since the
#    third rerun; it was an absolute gain of 0.005, which a one-layer loss of 7e-4 could not fail);
# 3. focusing: the one-layer model puts at least `FOCUS_MASS` of its attention on the matching token;
# 4. the query and key norms grow during training: for every spectrum, the product ‖Q‖·‖K‖ of the
#    one-layer model ends above `NORM_GROWTH` × its initial value.
#
# Every number is a mean over seeds, per spectrum (a loss at one depth, the best deeper model's loss
# over one layer's, the attention mass and the norm growth at the end of training), with its
# 95 % interval over seeds (`icl.intervals`: jackknife, Student's t). A check *holds* when the whole
# interval lies on its side of the threshold, *fails* when the whole interval lies on the other
# side, and is *inconclusive* otherwise; with a single seed (the `quick` profile) there is no
# interval, the value decides, and the record says n_seeds = 1. *(The only change since these
# criteria were first written: this interval rule, and every seed read instead of the first. The
# thresholds are unchanged.)* The thresholds live in `icl.claims.easy`, the one place they are set;
# from there:

# %%
rules.show_criteria(s.params, "C2")

# %%
runs = s.run(grids.easy_nonlinear(s.params)["sphere"])  # the configs: icl.grids.easy_nonlinear
df = tables.losses_frame(runs)
nb.save_table(s, df, "losses")
df.pivot_table(index=["input_exponent", "task_exponent"], columns="depth", values="loss")

# %% [markdown]
# ## Training curves
# Every model must reach its plateau before its final loss means anything (hollow circles in the
# loss-versus-depth figure mark runs that did not).

# %%
panels = plots.curve_panels({plots.spectrum_label(*sp): runs_of(runs, sp) for sp in s["spectra"]})
curves_png = nb.save_figure(
    s, panels, "training_curves",
    "Evaluation loss against training step for every depth and seed of softmax attention on the easy task, one panel per spectrum.",
)

# %% [markdown]
# ## Loss against depth

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.5))
for (a, b), part in df.groupby(["input_exponent", "task_exponent"]):
    plots.loss_vs_depth(ax, part, plots.spectrum_label(a, b))
ax.axhline(rules.NEAR_ZERO, color="grey", ls="--", lw=1, label="near-zero threshold")
plots.legend(ax, outside=True)
ax.set_title("softmax attention, easy task")
depth_png = nb.save_figure(
    s, fig, "loss_vs_depth",
    "Softmax attention's loss against depth on the easy task (C2): one layer already solves it, and depth adds little.",
)

# %% [markdown]
# The softmax bound of notebooks 03 and 06 (`icl.bounds`: the best isotropic softmax of the cosine,
# f_β = Σ_μ softmax_μ(β cos(x_q, x_μ)) y_μ, with the best β and readout) is not drawn in the figure:
# on the easy task the query's copy in the context has cosine 1, so a large enough β reads it off
# and the bound is at or near zero. A trained layer can represent it (K_lᵀQ_l ∝ I on the sphere),
# so one layer suffices in principle, and what separates the trained losses from zero is training,
# not depth. The bound and its β for each spectrum, on this notebook's evaluation set:

# %%
easy_bound = pd.DataFrame(
    [
        {
            "spectrum": plots.spectrum_label(a, b),
            **bounds.softmax_bound(
                *bounds.contexts(s.config(task="easy", input_exponent=a, task_exponent=b), 2048)
            ),
        }
        for a, b in s["spectra"]
    ]
)
nb.save_table(s, easy_bound, "softmax_bound")
easy_bound

# %% [markdown]
# ## Focusing: attention on the matching token, and growing query/key norms
# The probe follows the one-layer model along training: how much attention lands on the token whose
# label is the target, the entropy of the attention, and the Frobenius norms of Q and K (the figure
# shows the first seed; the verdict reads every seed).

# %%
one_layer = [r for r in runs if r["config"]["depth"] == 1 and r["config"]["seed"] == s["seeds"][0]]
fig, axes = plots.panel_grid(3, 3.8, 3.0)
for r in one_layer:
    f, lab = r["focus"], plots.spectrum_label(
        r["config"]["input_exponent"], r["config"]["task_exponent"]
    )
    axes[0].plot(f["step"], f["target_mass"], label=lab)
    axes[1].plot(f["step"], f["entropy"], label=lab)
    axes[2].plot(f["step"], np.array(f["query_norm"]) * np.array(f["key_norm"]), label=lab)
axes[0].set_ylabel("attention mass on the matching token")
axes[1].set_ylabel("attention entropy (nats)")
axes[2].set_ylabel("‖Q‖·‖K‖")
axes[2].set_yscale("log")
for ax in axes:
    ax.set_xlabel("training step")
plots.legend(axes[0])
focus_png = nb.save_figure(
    s, fig, "focusing",
    "The one-layer model over training: attention on the matching token, attention entropy, and the norms of Q and K (first seed).",
)

# %% [markdown]
# ## Why the inputs are projected onto a sphere
# A bilinear score (Q x_q)·(K x_μ) grows with the length of x_μ, so with raw Gaussian inputs a long
# context vector can outscore the matching one; on the sphere only the direction counts. Same model,
# same budget, one layer, raw inputs:

# %%
raw = s.run(grids.easy_nonlinear(s.params)["raw"])
sphere = {
    (r["config"]["input_exponent"], r["config"]["task_exponent"]): r["final_loss"]
    for r in one_layer
}
compare = [
    {
        "spectrum": plots.spectrum_label(
            r["config"]["input_exponent"], r["config"]["task_exponent"]
        ),
        "raw Gaussian inputs": r["final_loss"],
        "unit-sphere inputs": sphere.get(
            (r["config"]["input_exponent"], r["config"]["task_exponent"]), np.nan
        ),
    }
    for r in raw
]
compare = pd.DataFrame(compare)
nb.save_table(s, compare, "raw_vs_sphere")
ax = compare.set_index("spectrum").plot.bar(figsize=(5, 3), logy=True, rot=0, xlabel="spectrum")
ax.set_ylabel("relative loss, depth 1")
raw_png = nb.save_figure(
    s, ax.figure, "raw_vs_sphere",
    "One softmax layer on raw Gaussian inputs against the same layer on inputs projected onto the sphere, at each spectrum.",
)
compare

# %% [markdown]
# ## Verdict
# Per spectrum, with intervals over seeds: the one-layer loss, the best deeper model's loss relative
# to it, and the one-layer model's attention on the matching token and norm growth.

# %%
focus = tables.focus_frame(runs)
table = estimates.per_sweep(df, tables.SPECTRUM, estimates.one_layer_gain).merge(
    estimates.per_sweep(
        focus[focus.depth == 1],
        tables.SPECTRUM,
        estimates.column_means,
        columns=["target_mass", "norm_growth"],
    ),
    on=[*tables.SPECTRUM, "n_seeds"],
)
nb.save_table(s, table, "c2_numbers")
# No plateau check: the core bounds a loss from above, and a run still falling (every one here: a
# loss of 1e-4 keeps halving, more than the plateau test's 1 %) only goes further below it.
checks = rules.c2(table)
by_spectrum = {
    name: {
        plots.spectrum_label(r.input_exponent, r.task_exponent): estimates.estimate(r, name)
        for _, r in table.iterrows()
    }
    for name in ("R_1", "deeper_over_one", "target_mass", "norm_growth")
}
rules.record(
    s.params, "C2", checks,
    {
        "one-layer loss": by_spectrum["R_1"],
        "best deeper / one layer": by_spectrum["deeper_over_one"],
        "attention on match": by_spectrum["target_mass"],
        "|Q| |K| end / start": by_spectrum["norm_growth"],
        "converged": bool(df.converged.all()),
    },
    depth_png,
)
nb.write_results(
    s,
    {
        "c2_numbers": table.to_dict("records"),
        "checks": checks,
        "softmax_bound": easy_bound.to_dict("records"),
        "raw_vs_sphere": compare.to_dict("records"),
    },
)
table[[*tables.SPECTRUM, "n_seeds", "R_1", "deeper_over_one", "target_mass", "norm_growth"]]

# %%
# NBVAL_CHECK_OUTPUT
nb.show(
    {
        "one-layer loss per spectrum": table.R_1.tolist(),
        "loss per spectrum and depth": df.groupby([*tables.SPECTRUM, "depth"]).loss.mean().tolist(),
        "attention on match": table.target_mass.tolist(),
        "norm growth": table.norm_growth.tolist(),
        "raw-input loss": compare["raw Gaussian inputs"].tolist(),
    },
    digits=2,
)
show_claims(s.params)

# %% [markdown]
# ## Reading the results
#
# What to look for: whether every one-layer loss sits far below the near-zero threshold, and how
# close to the softmax bound above it gets; whether a deeper model ever improves on one layer by more
# than the tolerance (at losses this small, deeper models can as well end slightly worse: they have
# more to train in the same budget); whether the attention mass on the matching token climbs to
# nearly one while ‖Q‖·‖K‖ grows, which is how a softmax layer sharpens onto one token. The plateau
# flag (hollow circles) measures a *relative* fall over the last 20 % of training, so a loss that is
# already tiny but still falling by a few per cent fails it: the flag cannot weaken the verdict
# (longer training only brings these losses closer to zero), but it is shown as measured. Finally,
# how far raw Gaussian inputs end above unit-sphere ones at the same budget: that gap is why the
# inputs are projected onto a sphere. From this run:

# %%
for _, r in table.iterrows():
    print(
        f"{plots.spectrum_label(r.input_exponent, r.task_exponent)}: one layer {r.R_1:.2g}, best deeper / one layer "
        f"{r.deeper_over_one:.2g}, attention on the match {r.target_mass:.3f}, ‖Q‖·‖K‖ grew {r.norm_growth:.1f}x "
        f"({int(r.n_seeds)} seed{'s' if r.n_seeds > 1 else ''})"
    )
print(
    f"softmax bound: {easy_bound.single.max():.2g} at most, beta {easy_bound.beta.min():.0f} to {easy_bound.beta.max():.0f}"
)
print(
    f"{int((~df.converged).sum())} of {len(df)} runs flagged as still falling at the end of training"
)
print(
    "raw Gaussian over unit-sphere inputs, one layer: "
    + ", ".join(
        f"{r.spectrum} {r['raw Gaussian inputs'] / r['unit-sphere inputs']:.0f}x"
        for _, r in compare.iterrows()
    )
)
