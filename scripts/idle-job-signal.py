#!/usr/bin/python3
"""How much can Philly's job table tell about its node series? An upper bound for idle forecasts with a job signal.

    scripts/idle-job-signal.py ../shared/datasets/philly/philly_node_sequence.csv ../shared/datasets/philly/philly_jobs.csv

The node series counts idle nodes (total - active) each minute; the job table has each job's submit time, run time
and GPUs, but no start time and no nodes. Taking start = submit, the table gives the GPUs its jobs hold each minute.
The script prints:

1. the correlation between the 30- and 60-minute changes of the idle nodes and of those GPUs, for time shifts of
   -12 h to +12 h between the two files (a time zone would show as a peak);
2. for three windows (origins at 50%, 62.5% and 75% of the node series, each scored to the next origin, the last to
   the end), the MAE of the idle-node count 30 and 60 minutes ahead, every 5 minutes, of: persistence; the mean of
   the last k minutes, k chosen on what came before the origin; scikit-learn's gradient-boosted trees (absolute
   error) on the history's own features; and the same trees given, besides, an oracle of the job table over the
   lead time (GPUs starting and ending, jobs starting and ending, by start = submit). No forecast can know more of
   the job table than that oracle, so its gain over persistence bounds what a job signal from this table can add.

Needs Debian's python3-numpy and python3-sklearn.
"""
import csv
import sys
from datetime import datetime, timezone

try:
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingRegressor
except ImportError as e:  # a clear message, not a traceback
    sys.exit(f"idle-job-signal.py: {e}: install Debian's python3-sklearn")


def seconds(path, line, s):
    try:
        return datetime.strptime(s, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        sys.exit(f"{path}: line {line}: time {s!r}: want YYYY-MM-DD HH:MM:SS")


def read_nodes(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        if r.fieldnames != ["time", "active", "total"]:
            sys.exit(f"{path}: line 1: want the columns time,active,total")
        t, idle = [], []
        for line, rec in enumerate(r, start=2):
            t.append(seconds(path, line, rec["time"]))
            idle.append(max(int(rec["total"]) - int(rec["active"]), 0))
    t = np.array(t)
    at = np.round((t - t[0]) / 60).astype(int)
    if np.any(np.diff(at) <= 0):
        sys.exit(f"{path}: want one row a minute in time order")
    grid = np.full(at[-1] + 1, np.nan)  # minutes without a row stay NaN
    grid[at] = idle
    return t[0], grid


def read_jobs(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        for c in ("timestamp", "duration", "num_gpus"):
            if c not in (r.fieldnames or []):
                sys.exit(f"{path}: line 1: no column {c}")
        sub, dur, gpus = [], [], []
        for line, rec in enumerate(r, start=2):
            sub.append(seconds(path, line, rec["timestamp"]))
            dur.append(float(rec["duration"]))
            gpus.append(int(rec["num_gpus"]))
    return np.array(sub), np.array(dur), np.array(gpus, float)


def cumulative(minute, weight, n):
    """cumulative(...)[i] is the weight of the events before minute i."""
    a = np.zeros(n + 2)
    np.add.at(a, np.clip(minute, 0, n + 1), weight)
    return np.concatenate([[0], np.cumsum(a)])[: n + 2]


def history_features(idle, i, h):
    x = [idle[i]]
    x += [idle[i] - idle[i - lag] for lag in (1, 5, 15, 60, 240)]
    for w in (15, 60, 240):
        win = idle[i - w + 1 : i + 1]
        x += [win.mean() - idle[i], win.min() - idle[i], win.max() - idle[i]]
    x.append(idle[i + h - 1440] - idle[i - 1440])
    x.append(((i + h) % 1440) / 1440)
    return x


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    start, idle = read_nodes(sys.argv[1])
    sub, dur, gpus = read_jobs(sys.argv[2])
    n = len(idle)
    s = np.floor((sub - start) / 60).astype(int)
    e = np.floor((sub + dur - start) / 60).astype(int)
    ones = np.ones_like(gpus)

    missing = np.isnan(idle)
    print(f"{len(idle)} minutes, {missing.sum()} without a row")
    print("1. correlation of changes, idle nodes against GPUs held by the table's jobs (start = submit)")
    for lead in (30, 60):
        best = (0.0, 0)
        for shift_h in range(-12, 13):
            held = cumulative(s + 60 * shift_h, gpus, n) - cumulative(e + 60 * shift_h, gpus, n)
            a, b = idle[lead:] - idle[:-lead], held[lead:n] - held[: n - lead]
            ok = ~np.isnan(a)
            ok[: 4 * 1440] = False
            c = np.corrcoef(a[ok], b[ok])[0, 1]
            if abs(c) > abs(best[0]):
                best = (c, shift_h)
        print(f"   {lead} min: the strongest over shifts -12..12 h is {best[0]:+.3f} (shift {best[1]:+d} h)")

    starts_g, ends_g = cumulative(s, gpus, n), cumulative(e, gpus, n)
    starts_j, ends_j = cumulative(s, ones, n), cumulative(e, ones, n)
    held = starts_g - ends_g

    def oracle(i, h):
        return [ends_g[i + h] - ends_g[i], starts_g[i + h] - starts_g[i], ends_j[i + h] - ends_j[i],
                starts_j[i + h] - starts_j[i], held[i], held[i] - held[i - 60]]

    print("2. MAE in idle nodes, trained before each origin and scored to the next")
    cuts = [int(n * f) for f in (0.5, 0.625, 0.75)] + [n]
    first = 7 * 1440
    for lead in (30, 60):
        # Origins whose features and target are all on record.
        rows = [i for i in range(first, n - lead, 5) if not np.isnan(idle[i - 240 : i + lead + 1]).any()
                and not np.isnan(idle[i + lead - 1440]) and not np.isnan(idle[i - 1440])]
        hist = np.array([history_features(idle, i, lead) for i in rows])
        orc = np.array([oracle(i, lead) for i in rows])
        y = np.array([idle[i + lead] - idle[i] for i in rows])
        at = np.array(rows)
        for w in range(3):
            fit = at + lead < cuts[w]
            test = (at >= cuts[w]) & (at < cuts[w + 1])
            pers = np.abs(y[test]).mean()
            # The mean of the last k minutes, k chosen before the origin.
            def mean_err(k, mask):
                m = np.array([idle[i - k + 1 : i + 1].mean() for i in at[mask]])
                return np.abs(m - (idle[at[mask]] + y[mask])).mean()
            k = min((1, 3, 5, 10, 15, 30, 60), key=lambda k: mean_err(k, fit))
            out = [f"persistence {pers:.3f}", f"mean of last {k} min {mean_err(k, test):.3f}"]
            for name, X in (("trees", hist), ("trees + oracle jobs", np.hstack([hist, orc]))):
                m = HistGradientBoostingRegressor(loss="absolute_error", max_iter=300, learning_rate=0.05, random_state=1)
                m.fit(X[fit], y[fit])
                mae = np.abs(m.predict(X[test]) - y[test]).mean()
                out.append(f"{name} {mae:.3f} ({100 * (1 - mae / pers):+.1f}%)")
            t0 = datetime.fromtimestamp(start + 60 * cuts[w], timezone.utc).strftime("%b %d %H:%M")
            print(f"   {lead} min, from {t0} ({test.sum()} origins): " + ", ".join(out))


if __name__ == "__main__":
    main()
