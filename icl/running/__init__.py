"""The running machinery: the run cache, sweeps, notebooks run with papermill (`icl reproduce`),
plans and budgets, processes and output folders, the command line and REPORT.md.
Nothing in the core, the analysis or the claims imports it."""
