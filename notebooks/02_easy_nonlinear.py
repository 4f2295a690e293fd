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

from icl import claims
from icl import notebook as nb
from icl import plots
from icl.sweep import runs_of

plots.style()

# %% tags=["parameters"]
profile = "quick"  # which params/<profile>/ file these values came from (informational)
output_dir = "outputs/02_easy_nonlinear"  # figures, tables, results.json (relative to the repo root)
cache_dir = "outputs/runs"  # run cache; None trains afresh into a temporary folder
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
seeds = [0]
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
# C2 is **reproduced** when all four hold, **partly reproduced** when some do:
# 1. one layer reaches near-zero loss: relative loss below 0.01 for every spectrum;
# 2. depth adds nothing: no deeper model beats depth 1 by more than 0.005 in relative loss;
# 3. focusing: the one-layer model puts at least 90 % of its attention on the matching token;
# 4. the query and key norms grow during training: for every spectrum, the product ‖Q‖·‖K‖ of the
#    one-layer model ends above 1.5 × its initial value.

# %%
NEAR_ZERO, DEPTH_GAIN, FOCUS_MASS, NORM_GROWTH = 0.01, 0.005, 0.9, 1.5

runs = s.run(s.grid(s["depths"], s["seeds"], s["spectra"], model="softmax", task="easy", track_focus=True))
df = nb.losses_frame(runs)
nb.save_table(s, df, "losses")
df.pivot_table(index=["input_exponent", "task_exponent"], columns="depth", values="loss")

# %% [markdown]
# ## Training curves
# Every model must reach its plateau before its final loss means anything (hollow circles in the
# loss-versus-depth figure mark runs that did not).

# %%
panels = plots.curve_panels({plots.spectrum_label(*sp): runs_of(runs, sp) for sp in s["spectra"]}, 8)
curves_png = nb.save_figure(s, panels, "training_curves")

# %% [markdown]
# ## Loss against depth

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
for (a, b), part in df.groupby(["input_exponent", "task_exponent"]):
    plots.loss_vs_depth(ax, part, plots.spectrum_label(a, b))
ax.axhline(NEAR_ZERO, color="grey", ls="--", lw=1, label="near-zero threshold")
ax.legend(fontsize=8)
ax.set_title("softmax attention, easy task")
depth_png = nb.save_figure(s, fig, "loss_vs_depth")

# %% [markdown]
# The bound of notebooks 03 and 06 is not drawn here because it is exactly zero:
# `python -m icl bound --task easy` finds that the isotropic softmax of the cosine, with β between
# about 160 (isotropic) and 510 (a = 1.5), reads the query's copy in the context with a relative
# loss of 0.0 for the spectra run here (d = 16, P = 64). A trained
# layer can represent it (K_lᵀQ_l ∝ I on the sphere), so one layer suffices in principle, and what
# separates the trained losses from zero is training, not depth.

# %% [markdown]
# ## Focusing: attention on the matching token, and growing query/key norms
# The probe follows the one-layer model along training: how much attention lands on the token whose
# label is the target, the entropy of the attention, and the Frobenius norms of Q and K.

# %%
one_layer = [r for r in runs if r["config"]["depth"] == 1 and r["config"]["seed"] == s["seeds"][0]]
fig, axes = plt.subplots(1, 3, figsize=(11, 3))
for r in one_layer:
    f, lab = r["focus"], plots.spectrum_label(r["config"]["input_exponent"], r["config"]["task_exponent"])
    axes[0].plot(f["step"], f["target_mass"], label=lab)
    axes[1].plot(f["step"], f["entropy"], label=lab)
    axes[2].plot(f["step"], np.array(f["query_norm"]) * np.array(f["key_norm"]), label=lab)
axes[0].set_ylabel("attention mass on the matching token")
axes[1].set_ylabel("attention entropy (nats)")
axes[2].set_ylabel("‖Q‖·‖K‖")
axes[2].set_yscale("log")
for ax in axes:
    ax.set_xlabel("training step")
axes[0].legend(fontsize=7)
focus_png = nb.save_figure(s, fig, "focusing")

# %% [markdown]
# ## Why the inputs are projected onto a sphere
# A bilinear score (Q x_q)·(K x_μ) grows with the length of x_μ, so with raw Gaussian inputs a long
# context vector can outscore the matching one; on the sphere only the direction counts. Same model,
# same budget, one layer, raw inputs:

# %%
raw = s.run(s.grid([1], s["seeds"][:1], s["raw_spectra"], model="softmax", task="easy", normalize_inputs=False))
sphere = {(r["config"]["input_exponent"], r["config"]["task_exponent"]): r["final_loss"] for r in one_layer}
compare = [{"spectrum": plots.spectrum_label(r["config"]["input_exponent"], r["config"]["task_exponent"]),
            "raw Gaussian inputs": r["final_loss"],
            "unit-sphere inputs": sphere.get((r["config"]["input_exponent"], r["config"]["task_exponent"]), np.nan)}
           for r in raw]
compare = pd.DataFrame(compare)
nb.save_table(s, compare, "raw_vs_sphere")
ax = compare.set_index("spectrum").plot.bar(figsize=(5, 3), logy=True, rot=0)
ax.set_ylabel("relative loss, depth 1")
raw_png = nb.save_figure(s, ax.figure, "raw_vs_sphere")
compare

# %% [markdown]
# ## Verdict

# %%
d1 = df[df.depth == 1].groupby(["input_exponent", "task_exponent"]).loss.mean()
best_deeper = df[df.depth > 1].groupby(["input_exponent", "task_exponent"]).loss.min()
gain = (d1 - best_deeper).max() if len(best_deeper) else 0.0
mass = min(r["focus"]["target_mass"][-1] for r in one_layer)
growth = min(r["focus"]["query_norm"][-1] * r["focus"]["key_norm"][-1] /
             (r["focus"]["query_norm"][0] * r["focus"]["key_norm"][0]) for r in one_layer)
checks = {"near zero": bool(d1.max() < NEAR_ZERO), "no depth gain": bool(gain <= DEPTH_GAIN),
          "focusing": bool(mass >= FOCUS_MASS), "norm growth": bool(growth > NORM_GROWTH)}
status = claims.verdict(checks)
claims.claim(s, "C2", "Softmax attention solves the easy task in one layer for every spectrum; depth adds nothing; "
         "the matching token gets nearly all attention; query/key norms grow.", status,
         {"worst one-layer loss": d1.max(), "largest gain from depth": gain, "min attention on match": mass,
          "min norm growth": growth, "converged": bool(df.converged.all())}, depth_png,
         f"depth-1 loss < {NEAR_ZERO} for all spectra, depth gain <= {DEPTH_GAIN}, "
         f"attention mass >= {FOCUS_MASS}, norm growth > {NORM_GROWTH}")
nb.write_results(s, {"one_layer_loss": d1.reset_index().values.tolist(), "depth_gain": gain, "target_mass": mass,
                     "norm_growth": growth, "checks": checks, "raw_vs_sphere": compare.values.tolist()})

# %%
# NBVAL_CHECK_OUTPUT
nb.show({"one-layer loss per spectrum": d1.tolist(), "largest gain from depth": gain,
         "attention on match (min)": mass, "norm growth (min)": growth,
         "raw-input loss": compare["raw Gaussian inputs"].tolist()})
nb.show(checks)
claims.show_claims(s)

# %% [markdown]
# **What the quick profile shows.** Every one-layer model ends below 0.001 in relative loss (1e-4
# for isotropic inputs), more than 90 % of its attention sits on the matching token, and ‖Q‖·‖K‖
# grows by a factor of three or more: the layer learns to focus, as §3.2 describes. Depths 2 and 4
# improve on one layer by at most 1.3e-5 and are more often slightly worse (by up to 2.5e-4). Every run is flagged `converged: false`:
# the plateau measure is a *relative* fall over the last 20 % of training, and a loss of 1e-4 that
# still falls by 3–5 % fails it. The flag does not weaken the verdict (a longer run can only bring
# these losses closer to zero), but it is shown as measured. Raw Gaussian inputs, the same model
# and budget, end about two orders of magnitude higher (0.015–0.22 against 1e-4–8e-4, the
# `raw_vs_sphere` table), which is why the inputs are projected onto a sphere.
