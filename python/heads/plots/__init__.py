"""heads.plots: the figures (gnuplot): gnuplot itself, heatmaps, the study's, causal and L0
figures, and scripts/plot (plot_run) and scripts/plot-sweep (plot_sweep).

May import: core, read, sweep, answers, report
"""
