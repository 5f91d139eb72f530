"""PNG charts of the recorded results (matplotlib, Agg backend), drawn from
`bench/results/latest.json` into `docs/img/`: B1's false completions and outcomes per arm per case,
B3's turn-stop time against log length, B7's tree hash against git, B8's snapshot upload and
B9's p99 per route against concurrent agents (their own figures, never re-measured here)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

IMG = Path(__file__).resolve().parent.parent / "docs" / "img"

# B1's outcome categories (bench/b1_faults.category), in stacking order: label, colour.
CATEGORIES = {
    "claimed, really done": ("claimed, really done", "#4c9a2a"),
    "claimed, not done": ("claimed, not done (false completion)", "#d62728"),
    "exhausted": ("exhausted (not claimed)", "#ff9f1c"),
    "abstained": ("abstained (not claimed)", "#8c8c8c"),
    "error": ("error", "#000000"),
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_b1(result: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    cases = result["params"]["cases"]  # in case order (latest.json sorts the keys)
    arms = ("baseline", "governed")
    trials = result["params"]["trials"]
    counts = {(case, arm): result["per_case"][case][arm]["categories"]
              for case in cases for arm in arms}

    height = 0.38
    rows = range(len(cases))
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(13, 0.55 * len(cases) + 2.2), sharey=True,
        gridspec_kw={"width_ratios": [1, 1.6]})
    for offset, arm, colour in ((-height / 2, "baseline", "#d62728"),
                                (height / 2, "governed", "#1f77b4")):
        values = [result["per_case"][case][arm]["false_completions"] for case in cases]
        left.barh([r + offset for r in rows], values, height=height, color=colour, label=arm)
        for r, value in zip(rows, values, strict=True):
            left.text(value + 0.1, r + offset, str(value), va="center", fontsize=8)
    left.set_xlim(0, trials * 1.15)
    left.set_xlabel(f"false completions (of {trials} trials)")
    left.set_title("False completions per case")
    left.legend(loc="lower right", fontsize=8)

    for offset, arm in ((-height / 2, "baseline"), (height / 2, "governed")):
        starts = [0.0] * len(cases)
        for name, (label, colour) in CATEGORIES.items():
            values = [counts[(case, arm)].get(name, 0) for case in cases]
            right.barh([r + offset for r in rows], values, height=height * 0.95, left=starts,
                       color=colour, label=label if arm == "governed" else None,
                       edgecolor="white", linewidth=0.5)
            starts = [s + v for s, v in zip(starts, values, strict=True)]
        for r in rows:
            right.text(-0.15, r + offset, arm[0].upper(), va="center", ha="right", fontsize=7,
                       color="#444444")
    right.set_xlim(-0.6, trials)
    right.set_xlabel(f"trials (B = baseline, G = governed; {trials} per arm)")
    right.set_title("Outcome of every trial, judged by the oracle")
    handles, labels = right.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8,
               frameon=False)

    left.set_yticks(list(rows))
    left.set_yticklabels([f"{case}{'' if result['cases'][case]['classic'] else ' (new)'}"
                          for case in cases], fontsize=9)
    left.invert_yaxis()
    reduction = result.get("false_completion_reduction")
    fig.suptitle(f"B1 fault matrix: baseline (agent believed) vs governed — false-completion "
                 f"reduction {reduction if reduction is None else f'{reduction:.2f}'}",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def draw_b3(result: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    sizes = [int(size) for size in result["params"]["sizes"]]
    fig, ax = plt.subplots(figsize=(11, 4.8))
    colours = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b")
    for colour, (_label, r) in zip(colours, result["databases"].items(), strict=False):
        per = r["sizes"]
        medians = [per[str(size)]["median_ms"] for size in sizes]
        p95 = [per[str(size)]["p95_ms"] for size in sizes]
        for index, size in enumerate(sizes):
            samples = per[str(size)].get("ms", [])
            jitter = [size * (1 + 0.06 * ((i % 7) - 3) / 3) for i in range(len(samples))]
            ax.scatter(jitter, samples, s=6, color=colour, alpha=0.25,
                       label=None if index else f"{r['database']}: every turn-stop")
        ax.plot(sizes, medians, "o-", color=colour, label=f"{r['database']}: median "
                f"(×{r['ratio']:.2f} from {sizes[0]:,} to {sizes[-1]:,})")
        ax.plot(sizes, p95, "--", color=colour, alpha=0.6, linewidth=1,
                label=f"{r['database']}: p95")
        ax.axhline(2 * medians[0], color=colour, linestyle=":", linewidth=1,
                   label=f"{r['database']}: goal ceiling (2 × median at {sizes[0]:,})")
    ax.set_xscale("log")
    ax.set_xticks(sizes)
    ax.set_xticklabels([f"{size:,}" for size in sizes])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("events in the log after the contract start (log scale)")
    ax.set_ylabel("turn-stop server time, ms")
    ax.set_title("B3: turn-stop cost against log length (20 checks, repair attempts)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def draw_b7(result: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    sizes = sorted(int(files) for files in result["sizes"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, phase, title in ((axes[0], "cold", "cold: empty stat cache / fresh index"),
                             (axes[1], "warm", "warm: one file changed")):
        for arm, label, colour, offset in (
                (phase, "governor hash_tree", "#1f77b4", (6, -11)),
                (f"git_{phase}", "stock git add + write-tree", "#d62728", (-8, 6))):
            values = [result["sizes"][str(files)]["median_ms"][arm] for files in sizes]
            ax.plot(sizes, values, marker="o", color=colour, label=label)
            for files, value in zip(sizes, values, strict=True):
                ax.annotate(f"{value:,.0f}", (files, value), textcoords="offset points",
                            xytext=offset, fontsize=7, color=colour, ha="right"
                            if offset[0] < 0 else "left")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes)
        ax.set_xticklabels([f"{files:,}" for files in sizes])
        ax.set_xlabel("files in the tree (log scale)")
        ax.set_ylabel("median wall time, ms (log scale)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("B7: workspace tree hash against stock git (same trees, same run)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def draw_b8(result: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    arms = [("git push", result["git"])] + [(f"client, {store}", arm)
                                             for store, arm in result["stores"].items()]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, unit, title in ((axes[0], "first", 1000.0, "first upload (s)"),
                                 (axes[1], "incremental", 1.0, "one file changed (ms)")):
        values = [arm[f"{key}_ms"] / unit for _, arm in arms]
        sent = [arm[f"{key}_bytes"] for _, arm in arms]
        bars = ax.bar([label for label, _ in arms], values,
                      color=["#d62728"] + ["#1f77b4"] * (len(arms) - 1))
        for bar, value, size in zip(bars, values, sent, strict=True):
            shown = f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size:,.0f} B"
            ax.annotate(f"{value:,.1f}\n{shown} sent", (bar.get_x() + bar.get_width() / 2,
                                                         value),
                        textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("median wall time" if key == "incremental" else "wall time")
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(y=0.25)
    fig.suptitle(f"B8: snapshot upload of {result['files']:,} files "
                 f"({result['bytes'] / 1e6:.0f} MB) against git push, same run")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def draw_b9(result: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    databases = result["databases"]
    fig, axes = plt.subplots(1, len(databases), figsize=(5.5 * len(databases), 4.4),
                             squeeze=False)
    for ax, (label, levels) in zip(axes[0], databases.items(), strict=True):
        agents = sorted(int(n) for n in levels)
        routes = sorted({route for level in levels.values() for route in level["routes"]})
        for route in routes:
            values = [levels[str(n)]["routes"].get(route, {}).get("p99_ms") for n in agents]
            ax.plot(agents, values, marker="o", label=route)
        ax.set_xscale("log")
        ax.set_xticks(agents)
        ax.set_xticklabels([str(n) for n in agents])
        ax.set_yscale("log")
        ax.set_xlabel("concurrent agents (log scale)")
        ax.set_ylabel("p99, ms (log scale)")
        ax.set_title(f"{label} (+{result['params']['waiters']:,} open long polls)",
                     fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("B9: p99 per route against concurrent agents")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


CHARTS: dict[str, tuple[str, Callable[[dict[str, Any], Path], None]]] = {
    "B1": ("b1_fault_matrix.png", draw_b1),
    "B3": ("b3_turn_stop.png", draw_b3),
    "B7": ("b7_tree_hash.png", draw_b7),
    "B8": ("b8_snapshot_upload.png", draw_b8),
    "B9": ("b9_load.png", draw_b9),
}


def draw(results: dict[str, Any], names: list[str]) -> list[Path]:
    """Draw the charts of the benchmarks `names` that have results; the paths written."""
    written = []
    for name in names:
        if name in CHARTS and name in results:
            filename, drawer = CHARTS[name]
            drawer(results[name], IMG / filename)
            written.append(IMG / filename)
    return written
