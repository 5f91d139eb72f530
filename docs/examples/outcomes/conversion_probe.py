"""An outcome probe over an analytics export: checkout conversion and the error rate of the
last seven days in checkouts.csv (day,sessions,checkouts,errors), written by the analytics
system into the governor's outcome data directory (seen by probes at /outcome-data).

It prints exactly one JSON object and nothing else; `dataAsOf` is when the export was written
(its modification time), so a stale export is refused by the governor, not judged."""

import csv
import json
import os

EXPORT = "/outcome-data/checkouts.csv"

with open(EXPORT, newline="") as handle:
    rows = list(csv.DictReader(handle))[-7:]
sessions = sum(int(row["sessions"]) for row in rows)
checkouts = sum(int(row["checkouts"]) for row in rows)
errors = sum(int(row["errors"]) for row in rows)
print(json.dumps({
    "dataAsOf": int(os.stat(EXPORT).st_mtime * 1000),
    "metrics": {"conversion": round(checkouts / sessions, 6),
                "error_rate": round(errors / sessions, 6)},
    "sampleSize": sessions,
}))
