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
# # Heads against depth, and looped layers (beyond the paper)
#
# **Question.** Notebooks 03, 06 and 07 find that rank-limited layers gain with depth because
# their key subspaces tile R^d in blocks of m = d/k layers. Real Transformers are multi-head, a
# head's query/key rank being d/h. Does the mechanism survive in attention shaped like that?
#
# - In the controlled model the heads of one layer add predictors exactly as layers do (a layer's
#   predictor is the mean of its heads', `icl.heads`), so at a fixed head rank k the loss should
#   depend on L·h, the number of heads in the stack, and one layer with h·k = d heads should reach
#   what m = d/k layers of rank k reach.
# - The shared-stream model (C.1) is the closest to a real Transformer here: does depth still help
#   when every layer already has h·k = d?
# - A looped stack (`tie_layers`: one layer's parameters at every depth), which the paper's
#   discussion proposes as a cheaper route to the same aggregation, averages identical predictors
#   in the controlled model and should gain nothing there; in the shared-stream and context-update
#   models the state evolves between loops. How much of the untied stack's gain does it keep?
#
# **Setup.** (a) The controlled softmax model on notebook 03's task and protocol (top-2, isotropic
# spectrum, d = 16, P = 64 at the quick profile), every head count h of `head_counts` at every
# head rank k of `head_ranks` with h·k ≤ d; h = 1 at notebook 03's depths (its runs: the same
# configs, which the run cache serves), h > 1 at the `head_depths` with
# L·h ≤ `max_total_heads`. (b) The shared
# stream with `stream_heads` heads of rank d/h beside one head of rank d and one of rank d/h, and
# (c) untied and looped stacks of `loop_models` at head rank `loop_key_dim`, both on notebook 04's
# protocol (the `context_*` values; its untied runs are served by the cache).

# %%
import matplotlib.pyplot as plt
import pandas as pd

from icl import bounds, estimates, grids, plots, show_claims, tables
from icl import heads_loops as hl
from icl import notebook as nb
from icl.claims import PLATEAU, at_plateau
from icl.claims import heads as rules

plots.style()

# %% tags=["parameters"]
profile = "quick"  # which params/<profile>/ file these values came from (informational)
# output_dir: a run by hand (git-ignored); icl reproduce: outputs/<profile>/
output_dir = "outputs/scratch/08_heads_and_loops"
cache_dir = "outputs/runs"  # run cache; None trains afresh, keeping nothing on disk
device = "auto"
threads = 0  # torch CPU threads; 0 keeps torch's default
progress = True
dim = 16
context_length = 64
top_k = 2
steps = 2000  # (a): notebook 03's protocol, so that its one-head runs are shared
batch_size = 256
learning_rate = 0.003
init_scale = 1.0
eval_contexts = 16384
curve_contexts = 2048
spectra = [[0.0, 0.0]]  # the first one is used: [input_exponent, task_exponent]
depths = [1, 2, 3, 4, 6, 8, 12, 16, 32, 64]  # (a) depths of one head (notebook 03's)
head_depths = [1, 2, 4]  # (a) depths of h > 1 with L h at most max_total_heads
seeds = [0, 1, 2, 3, 4]
head_counts = [1, 4]  # h of (a): 1 must be there, the stacks of h > 1 are judged against it
head_ranks = [4]  # k of (a), each with every h whose h k is at most dim
max_total_heads = 16
context_steps = 1000  # (b) and (c): notebook 04's protocol, so that its untied runs are shared
context_batch_size = 128  # notebook 04's batch_size, so that its runs are shared
context_learning_rate = 0.01
context_eval_contexts = 1024
context_eval_points = 10
context_seeds = [0, 1, 2]  # seeds of the shared-stream and context-update loops of (c)
stream_seeds = [0, 1, 2]  # seeds of (b): heads train through autograd there, the C kernel has one head
stream_heads = 4  # (b) h, each head of rank dim / h: h k is d
stream_depths = [1, 2, 4]  # (b); one head of rank dim / h also trains at every L h (R7)
loop_models = ["shared_stream", "context_updates"]  # (c): a looped controlled stack is its one layer
loop_key_dim = 4
loop_depths = [1, 2, 4, 8, 16]
fit_contexts = 2048  # contexts that icl.bounds fits its temperatures and readouts on
nb.end_of_parameters(globals())

# %%
s = nb.parameters(globals())
first = s["spectra"][0]
d, stream_k = s["dim"], s["dim"] // s["stream_heads"]

# %% [markdown]
# ## Verdict criteria (written before the runs)
#
# Every number a check reads comes with its 95 % interval over seeds (jackknife, Student's t; the
# sweeps of one seed share its data stream and are left out together). A check *holds* when the whole
# interval lies on its side of the threshold, *fails* when the whole interval lies on the other
# side, and is *inconclusive* otherwise. Each claim has a **core** check, which carries the
# statement, and secondary ones: *reproduced* when all hold, *partly* when the core holds and a
# secondary fails, *not reproduced* when the core fails, *inconclusive* when the interval of a
# check that decides straddles its threshold (docs/statistics.md). The gain from depth of a sweep
# is 1 − R_deepest / R_1.
#
# - **R7 (heads and layers are interchangeable)**: the core compares, in the shared stream, each
#   stack of h heads of rank d/h with the one-head stack of as many heads, R(L, h) against
#   R(L·h, 1). Secondary, in the controlled model at every head rank k: one layer of d/k heads
#   captures most of the one-head stack's gain from depth, and the multi-head stacks follow the
#   complementary-subspace baseline at L·h predictors (as R4b). In the controlled model R(L, h) =
#   R(L·h, 1) is an identity (a layer of h heads is h layers: `tests/core/test_heads.py`), so its
#   ratio is shown, never judged (since the third rerun; docs/history.md).
# - **R8 (a shared-stream layer with h·k = d leaves depth little to buy)**: the core bounds the
#   gain from depth of the stream with h·k = d; secondary: that gain against a single head of
#   rank d/h, and one layer of heads against one head of rank d.
# - **R9 (looped stacks)**: the core asks that the looped shared-stream and context-update stacks,
#   to depth 16, keep most of their untied twins' gain (gain looped / gain untied; undefined, so
#   inconclusive, where the untied stack gains nothing). A looped controlled stack is its one layer
#   (an identity, `tests/core/test_heads.py`), no longer a check.
#
# Every claim's core also needs the runs it reads to have reached their plateau; where some had
# not, the claim is inconclusive for want of budget.
#
# The exact thresholds, from `icl.claims.heads`:

# %%
rules.show_criteria(s.params)

# %% [markdown]
# ## The runs
# Every config comes from `icl.grids.heads_and_loops`; each frame has the head count, whether the
# stack is looped, the number of heads L·h in the stack and its trainable parameters.

# %%
runs = {name: s.run(cfgs) for name, cfgs in grids.heads_and_loops(s.params).items()}
frames = {name: hl.frame(rs) for name, rs in runs.items()}
df = pd.concat([f.assign(sweep=name) for name, f in frames.items()], ignore_index=True)
nb.save_table(s, df, "losses")
df.pivot_table(index=["sweep", "model", "key_dim", "heads", "tie_layers"], columns="depth",
               values="loss").round(3)

# %% [markdown]
# ## Training curves
# Every run this notebook read, its loss along training (each sweep's first seed; every run in
# `training_curves.csv`), with the window the plateau rule reads shaded: a run still falling there
# is dashed, and a verdict that reads it says so.

# %%
nb.save_figure(
    s, plots.curves_of(s.read), "training_curves",
    "Evaluation loss along training of every run this notebook read (first seed of each sweep), the plateau window shaded.",
)

# %% [markdown]
# ## (a) Heads against depth in the controlled model
# One panel per head rank k: the loss of every head count h against L·h (points: mean over seeds,
# bars: standard error), beside the untrained ensembles of L·h subspaces of rank k (random dashed,
# complementary dash-dotted, best temperature per depth) and the softmax bound (grey, `icl.bounds`,
# on the same evaluation set). The vertical line marks L·h = d/k.

# %%
heads = frames["heads"]
bnds = {
    k: bounds.bounds(
        s.config(task="difficult", key_dim=k, input_exponent=first[0], task_exponent=first[1]),
        s["depths"],
        s["fit_contexts"],
        cache=s.cache,
    )
    for k in s["head_ranks"]
}
fig, axes = plt.subplots(
    1, len(bnds), figsize=(5.2 * len(bnds), 3.9), squeeze=False, layout="constrained"
)
for ax, k in zip(axes[0], bnds):
    for i, h in enumerate(sorted(heads[heads.key_dim == k].heads.unique())):
        part = heads[(heads.key_dim == k) & (heads.heads == h)]
        # not the subspaces' colours
        plots.loss_vs_depth(
            ax,
            part.assign(depth=part.total_heads),
            f"h = {h} (mean ± s.e. over seeds)",
            color=plots.COLORS[[0, 3, 4, 5][i % 4]],
            shift=0.05 * i,
        )
    plots.bounds_lines(ax, bnds[k], depths=s["depths"])
    ax.axvline(d // k, color="0.6", lw=0.8, ls=(0, (4, 2)), label="L·h = d/k")
    ax.set(
        xlim=(0.8, 1.25 * max(s["depths"])),
        xlabel="heads in the stack, L·h",
        ylabel="relative loss R",
        title=f"controlled model, head rank k = {k} (d = {d})",
    )
plots.figure_legend(fig)
heads_png = nb.save_figure(
    s, fig, "heads_vs_depth",
    "Loss against L·h for every head count h, one panel per head rank, beside the untrained ensembles and the softmax bound.",
)

# %% [markdown]
# R(L, h) / R(L·h, 1) at every matched L·h (1: heads and layers interchangeable), per head rank
# and head count, with its 95 % interval.

# %%
ratios = hl.matched_table(heads)
nb.save_table(s, ratios, "matched_ratios")
ratios.pivot_table(index=["key_dim", "heads"], columns="L·h", values="ratio", aggfunc="first")

# %% [markdown]
# ## (b) The shared stream with h·k = d
# Left: the shared-stream model with `stream_heads` heads of rank d/h (h·k = d) against one head of
# rank d and one head of rank d/h, against depth (R8). Right: the same h heads against the one-head
# stack of rank d/h, against the heads in the stack L·h (R7: the curves meet where heads and layers
# are interchangeable). Notebook 04's protocol; points: mean over seeds; bars: standard error.

# %%
stream = frames["stream"]
fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.9), layout="constrained")
for i, (h, k) in enumerate(((s["stream_heads"], stream_k), (1, d), (1, stream_k))):
    part = stream[(stream.heads == h) & (stream.key_dim == k)]
    plots.loss_vs_depth(axes[0], part[part.depth <= max(s["stream_depths"])],
                        f"h = {h}, k = {k} ({hl.parameter_range(part)})",
                        color=plots.COLORS[[0, 3, 4][i]], shift=0.05 * i)
    if k == stream_k:  # the same label: one legend entry for both panels
        plots.loss_vs_depth(axes[1], part.assign(depth=part.total_heads), f"h = {h}, k = {k} ({hl.parameter_range(part)})",
                            color=plots.COLORS[[0, 3, 4][i]], shift=0.05 * i)
axes[0].set(xlim=(0.8, 1.25 * max(s["stream_depths"])), xlabel="depth $L$", ylabel="relative loss R",
            title=f"shared stream, d = {d}: depth")
axes[1].set(xlabel="heads in the stack, L·h", ylabel="relative loss R", title="the same stacks against L·h")
plots.figure_legend(fig)  # below the panels, off the points
stream_png = nb.save_figure(
    s, fig, "shared_stream_heads",
    "The shared-stream model with h heads of rank d/h against one head of rank d and of rank d/h (left), and against L·h (right).",
)

# %% [markdown]
# ## (c) Looped against untied stacks
# One panel per model (shared stream, context updates) at head rank `loop_key_dim`: the untied stack (its own layers) and the looped
# one (one layer's parameters at every depth), each labelled with its trainable parameters over the
# depths drawn (points: mean over seeds; bars: standard error; a hollow black circle: a run there
# had not reached its plateau). At depth 1 the two are the same model; the looped points are drawn a
# little to the right, so that neither hides the other.

# %%
loops = frames["loops"]
fig, axes = plt.subplots(
    1,
    len(s["loop_models"]),
    figsize=(4.6 * len(s["loop_models"]), 3.9),
    squeeze=False,
    layout="constrained",
)
for ax, m in zip(axes[0], s["loop_models"]):
    for i, tied in enumerate((False, True)):
        part = loops[(loops.model == m) & (loops.tie_layers == tied)]
        name = "looped" if tied else "untied"
        plots.loss_vs_depth(
            ax, part, f"{name} ({hl.parameter_range(part)})", color=plots.COLORS[i], shift=0.06 * i
        )
    ax.set(
        xlim=(0.8, 1.25 * max(s["loop_depths"])),
        xlabel="depth $L$",
        ylabel="relative loss R",
        title=f"{m}, k = {s['loop_key_dim']}",
    )
    plots.legend(ax)
loops_png = nb.save_figure(
    s, fig, "looped_vs_untied",
    "Looped stacks (one layer's parameters at every depth) against untied ones, per model, labelled with their trainable parameters.",
)

# %% [markdown]
# ## Verdicts

# %%
r7_ranks = hl.rank_estimates(heads, d, bnds)  # the controlled model: R(L, h) against R(L h, 1), the baseline
stream_h, stream_full, stream_one = (tables.part_of(stream, heads=h, key_dim=k) for h, k in
                                     ((s["stream_heads"], stream_k), (1, d), (1, stream_k)))
stream_deviation = hl.matched_deviation(stream_one, {s["stream_heads"]: stream_h})
shallow = lambda part: part[part.depth <= max(s["stream_depths"])]  # R8 compares over the same depths
r8 = {"gain from depth, h k = d": hl.gain(stream_h),
      "gain / one rank-d/h head's gain": hl.gain_ratio(stream_h, shallow(stream_one)),
      "R_1 / one rank-d head's R_1": hl.one_layer_ratio(stream_h, stream_full)}
gains = {f"gain, {m} {'looped' if t else 'untied'}":
         hl.gain(tables.part_of(loops, model=m, tie_layers=t))
         for m in s["loop_models"] for t in (False, True)}
kept = {m: hl.gain_ratio(tables.part_of(loops, model=m, tie_layers=True),
                         tables.part_of(loops, model=m, tie_layers=False))
        for m in s["loop_models"]}
shares = {f"looped / untied gain, {m}": e for m, e in kept.items()}
checks = {"R7": {**rules.r7(stream_deviation, r7_ranks), PLATEAU: at_plateau(stream_h, stream_one)},
          "R8": {**rules.r8(*r8.values()), PLATEAU: at_plateau(stream_h)},
          "R9": {**rules.r9(kept), PLATEAU: at_plateau(loops)}}
rules.record(s.params, "R7", checks["R7"], rules.r7_numbers(stream_deviation, r7_ranks), stream_png)
rules.record(s.params, "R8", checks["R8"], r8, stream_png)
rules.record(s.params, "R9", checks["R9"], {**gains, **shares}, loops_png)
nb.write_results(s, {"checks": checks})

# %% [markdown]
# What to look for: whether the multi-head points fall on the one-head curve when drawn against
# L·h (and on the complementary baseline), whether the shared stream's curve with h·k = d is flat,
# and whether a looped stack's curve follows its untied twin's or stays at its one-layer loss.
# From this run:

# %%
print(f"shared stream: largest |R(L, h) / R(L h, 1) - 1| {estimates.interval_text(stream_deviation, 3)}")
for k, r in r7_ranks.items():
    print(f"controlled, k = {k}: largest |R(L, h) / R(L h, 1) - 1| {estimates.interval_text(r['deviation'], 3)}"
          f" (an identity: shown, not judged); largest |R / complementary - 1| {estimates.interval_text(r['baseline'], 3)}")
for name, e in {**r8, **gains, **shares}.items():
    print(f"{name}: {estimates.interval_text(e, 3)}")

# %%
# NBVAL_CHECK_OUTPUT
nb.show({"heads R_deepest": heads.groupby(["key_dim", "heads"]).apply(
             lambda p: p[p.depth == p.depth.max()].loss.mean(), include_groups=False).tolist(),
         "stream R_1, R_deepest": [p.groupby("depth").loss.mean().iloc[[0, -1]].tolist()
                                   for p in (stream_h, stream_full, stream_one)],
         "gains": [e.value for e in gains.values()]}, digits=2)
show_claims(s.params)
