#!/usr/bin/env python3
"""Draws weak-scaling efficiency against replicas for every framework in a results file.

Reads the JSON lines `bench/gpu_session.sh run OUTDIR cpu` writes (distrain bench
--replicas N --json lists, and bench/pytorch_ddp_reference.py objects) and writes one SVG:
efficiency (images/s at N over N x images/s at 1) per framework, with the ideal line.
Standard library only.
    python3 bench/scaling_svg.py results.jsonl out.svg [TITLE]
"""
import json
import sys

W, H, LEFT, RIGHT, TOP, BOTTOM = 560, 360, 60, 170, 40, 50
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def series_of(path):
    series = {}
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        d = json.loads(line)
        for p in d if isinstance(d, list) else [d]:
            if "replicas" not in p or "images_per_sec" not in p:
                continue
            name = p.get("framework") or f"distrain {p['strategy']}"
            series.setdefault(name, {})[int(p["replicas"])] = float(p["images_per_sec"])
    return {name: {n: ips / (n * pts[1]) for n, ips in sorted(pts.items())} for name, pts in series.items() if 1 in pts}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else "Weak scaling"
    series = series_of(src)
    top_n = max(n for pts in series.values() for n in pts)
    x = lambda n: LEFT + (W - LEFT - RIGHT) * (n - 1) / max(top_n - 1, 1)
    y = lambda e: TOP + (H - TOP - BOTTOM) * (1.2 - e) / 1.2
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for e in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(e)}" y2="{y(e)}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y(e) + 4}" text-anchor="end">{e:.2f}</text>')
    for n in sorted({n for pts in series.values() for n in pts}):
        out.append(f'<text x="{x(n)}" y="{H - BOTTOM + 18}" text-anchor="middle">{n}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 10}" text-anchor="middle">replicas</text>')
    out.append(f'<text x="16" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(-90 16 {(TOP + H - BOTTOM) / 2})" '
               'text-anchor="middle">efficiency</text>')
    out.append(f'<line x1="{x(1)}" x2="{x(top_n)}" y1="{y(1)}" y2="{y(1)}" stroke="#999" stroke-dasharray="4 3"/>')
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{x(n):.1f},{y(e):.1f}" for n, e in pts.items())
        out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"/>')
        for n, e in pts.items():
            out.append(f'<circle cx="{x(n):.1f}" cy="{y(e):.1f}" r="3" fill="{c}"><title>{name}: {n} replicas, '
                       f'efficiency {e:.3f}</title></circle>')
        out.append(f'<text x="{W - RIGHT + 10}" y="{TOP + 20 + 18 * i}" fill="{c}">{name}</text>')
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
