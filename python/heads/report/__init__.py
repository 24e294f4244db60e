"""heads.report: the HTML report: a run's page data and its sections (report_run, report_study,
report_causal), a sweep's (report_sweep), one self-contained page (report_page, with its code in
report_assets/) and scripts/report (report_cli).

May import: core, read, sweep, answers
"""
