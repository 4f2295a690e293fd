"""The science beyond training: theory and bounds from the task alone, untrained baselines, fits,
interval statistics and the tables and figures the notebooks draw. Imports the core, never the
claims or the running machinery."""
