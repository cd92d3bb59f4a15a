#!/usr/bin/python3
"""Draws bench/conv_algorithms.cpp's CSV: per shape, Winograd's time over direct's (median over
rounds, with the range across rounds), coloured by what onednn::winograd_suits picks.

usage: plot_conv_algorithms.py conv_algorithms.csv conv_algorithms.png
"""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    labels = [r["layer"] or f"n{r['n']} c{r['c']} o{r['o']} {r['hw']}x{r['hw']}" for r in rows]
    ratio = [float(r["ratio"]) for r in rows]
    low = [float(r["ratio"]) - float(r["ratio_min"]) for r in rows]
    high = [float(r["ratio_max"]) - float(r["ratio"]) for r in rows]
    colour = ["tab:green" if r["rule_picks_winograd"] == "1" else "tab:grey" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.22), 4.5))
    ax.bar(range(len(rows)), ratio, color=colour, yerr=[low, high], capsize=2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=90, fontsize=6)
    ax.set_ylabel("Winograd / direct time (fwd + bwd)")
    ax.set_title("oneDNN 3x3 conv, one thread: green = the rule picks Winograd")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
