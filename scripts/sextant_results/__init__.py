"""Reading sextant results files (schema sextant.result/1, results/METRICS.md).

load.py      files -> Run objects, and small accessors for case records
schema.py    validation against results/schema.json plus consistency checks
compare.py   baseline vs candidate: matching, metric directions, the gate
report/      figures (one module per suite), index.html and summary.md
"""
