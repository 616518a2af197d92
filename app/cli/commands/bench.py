"""``mnemoscope bench``: run every benchmark, regenerate docs/benchmarks.md and its plots.

The measurement code is in ``engine/bench`` (Qt-free); this module adds what needs Qt — the
GUI benchmarks of ``benchmarks/bench_gui.py`` and PNG plots drawn with QPainter onto a QImage
(matplotlib is not a dependency) — and writes the files.

    mnemoscope [--json] bench [--sizes 10000,100000] [--quick] [--only dedup,retrieval]
                              [--out docs/benchmarks.md] [--no-plots]
                              [--cache DIR] [--no-server]

``--sizes 10000,100000,1000000 --cache DIR`` adds the 1M rows (issue 24): the scale suite
builds each generated store once under ``DIR`` and reuses it in later runs; the dedup and
retrieval suites, which build afresh every run, stay at sizes up to 100K.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from app.cli.context import CliContext
from app.settings import atomic_write_text
from engine.bench import (
    FIRST_PAGE_TARGET,
    ROOT,
    STARTUP_TARGET,
    SUITES,
    TIMELINE_TARGET,
    BenchOptions,
    BenchReport,
    BenchRow,
    Stats,
    SuiteResult,
    judged,
    load_average,
    load_script,
    missing_row,
    render_markdown,
    run_bench,
    timeline_row,
)

__all__ = ["register"]

DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--sizes takes comma-separated record counts, got {text!r}") from None
    if not sizes or any(size < 10 for size in sizes):
        raise argparse.ArgumentTypeError(f"--sizes: every size must be >= 10 (got {text!r})")
    return sizes


def _only(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"--only: unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    return names


def register(subparsers: Any) -> None:
    """Add ``bench`` to the CLI."""
    bench = subparsers.add_parser(
        "bench", help="run the benchmarks and regenerate docs/benchmarks.md (+ plots)")
    bench.add_argument("--sizes", type=_sizes, default=None, metavar="N,N",
                       help="record counts for dedup and retrieval (default 10000,100000)")
    bench.add_argument("--quick", action="store_true",
                       help="smoke run at tiny sizes (figures not comparable with targets)")
    bench.add_argument("--only", type=_only, default=(), metavar="SUITE,...",
                       help=f"run only these suites: {', '.join(SUITES)}")
    bench.add_argument("--out", type=Path, default=DEFAULT_OUT,
                       help="markdown report to write (plots go to <its folder>/benchmarks/)")
    bench.add_argument("--no-plots", action="store_true", help="do not draw PNG plots")
    bench.add_argument("--cache", type=Path, default=None, metavar="DIR",
                       help="where the scale suite keeps its generated stores between runs "
                            "(default: the temp folder's mnemoscope-bench-scale); building "
                            "1M records costs about 15 minutes of one core (far longer on a "
                            "busy machine), reusing them seconds")
    bench.add_argument("--no-server", action="store_true",
                       help="scale suite: do not serve the stores with `chroma run`")
    bench.set_defaults(handler=run)


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    """Run the benchmarks, write the report, print a summary (or the JSON document)."""
    from engine.bench import report_to_json

    if args.quick:
        options = BenchOptions.quick_run(args.sizes or (300, 600))
    else:
        options = BenchOptions(sizes=args.sizes or (10_000, 100_000))
    options = BenchOptions(**{**_fields(options), "only": args.only or options.only,
                              "cache": args.cache, "scale_server": not args.no_server})
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    report = run_bench(options, gui=gui_suite, timeline=timeline_suite, log=ctx.warn)
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    plots: list[tuple[str, str]] = []
    if not args.no_plots:
        plots = draw_plots(report, out.parent / "benchmarks")
    atomic_write_text(out, render_markdown(
        report, [(caption, f"benchmarks/{name}") for caption, name in plots]))
    document = report_to_json(report)
    document["report"] = str(out)
    document["plots"] = [str(out.parent / "benchmarks" / name) for _, name in plots]
    if ctx.json:
        ctx.emit_json(document)
    else:
        for row in report.rows:
            figure = "—" if row.stats is None else f"{row.stats.median:.2f} {row.unit}"
            ctx.print(f"{row.verdict:>8}  {row.what} {row.size or ''}: {figure}  "
                      f"{row.target.text if row.target else ''}")
        counts = report.counts()
        ctx.print(f"{counts['met']} met, {counts['missed']} missed, {counts['not run']} not run;"
                  f" report: {out}")
    return 0


def _fields(options: BenchOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in BenchOptions.__slots__}


# -- GUI suite (Qt) ----------------------------------------------------------------------------


def gui_suite(store: Path | None, runs: int, log: Any) -> SuiteResult:
    """Start-up and first page through benchmarks/bench_gui.py (needs Qt, offscreen)."""
    result = SuiteResult()
    script = load_script("bench_gui")
    if script is None:
        reason = "benchmarks/bench_gui.py is not on this checkout"
        result.rows += [missing_row("startup", "window shown after launch", 0, "ms",
                                    STARTUP_TARGET, reason),
                        missing_row("first-page", "open store + first page", 0, "ms",
                                    FIRST_PAGE_TARGET, reason)]
        return result
    startup = script.bench_startup(runs)
    bare = [v * 1000.0 for v in startup[0][1]]
    shown = [v * 1000.0 for v in startup[1][1]]
    inside = [v * 1000.0 for v in startup[2][1]]
    stats, base = Stats.of(shown), Stats.of(bare)
    result.rows.append(judged(BenchRow(
        key="startup", what="process start → window shown (model loads in background)",
        size=0, unit="ms", stats=stats, baseline="`python -c pass`", baseline_stats=base,
        ratio=stats.median / base.median, target=STARTUP_TARGET,
        note=f"launch() → first paint median {Stats.of(inside).median:.0f} ms; "
             f"{startup[1][2]} imported by then", load=load_average()[0])))
    result.series["startup"] = shown
    log(f"startup: median {stats.median:.0f} ms")
    if store is None:
        result.rows.append(missing_row("first-page", "open store + first page", 0, "ms",
                                       FIRST_PAGE_TARGET, "no store was built (dedup not run)"))
        return result
    runs = max(1, min(runs, 3))
    cached, uncached, indexed, engine_pages = (
        [v * 1000.0 for v in row[1]] for row in script.bench_first_page(store, runs))
    cold = [v * 1000.0 for v in script.bench_process_first_page(store, runs)[0][1]]
    size = int(store.parent.name.split("-")[-1]) if store.parent.name.startswith("dedup-") else 0
    target = FIRST_PAGE_TARGET if size == 100_000 else None
    base = Stats.of(engine_pages)
    scope = "" if target else "; target is for 100K records"
    for key, what, values, note in (
            ("first-page", "open a store (read-only) → records table first page, view cache",
             cached, "the window (offscreen) from open_store to the table's first page; "
                     "chromadb already imported"),
            ("first-page-uncached",
             "open a store (read-only) → records table first page, no view cache", uncached,
             "first page from Chroma (newest written first) while the view is read in the "
             f"background; fully indexed after median {Stats.of(indexed).median / 1000:.1f} s "
             "(filters and sorts wait for that)")):
        stats = Stats.of(values)
        result.rows.append(judged(BenchRow(
            key=key, what=what, size=size, unit="ms", stats=stats,
            baseline="engine.list_records first page (200)", baseline_stats=base,
            ratio=stats.median / base.median if base.median > 0 else math.nan,
            target=target, note=note + scope, load=load_average()[0])))
        result.series[key] = values
        log(f"{key} at {size}: median {stats.median:.0f} ms")
    stats = Stats.of(cold)
    result.rows.append(judged(BenchRow(
        key="first-page-cold", what="process start → first page (view cache, model loading)",
        size=size, unit="ms", stats=stats, baseline="`python -c pass`",
        baseline_stats=Stats.of(bare), ratio=stats.median / Stats.of(bare).median,
        target=None, note="no DESIGN target of its own: start-up (judged above) + the open",
        load=load_average()[0])))
    log(f"first-page-cold at {size}: median {stats.median:.0f} ms")
    # The server-store rows (issue 24) come from the scale suite, on its cached stores.
    return result


def timeline_suite(events: int, frames: int, log: Any) -> SuiteResult:
    """Pan/zoom frame time through benchmarks/bench_timeline.py (``synthetic``, ``frames``)."""
    try:
        script = load_script("bench_timeline")
    except ImportError as exc:
        return SuiteResult(rows=[timeline_row(f"benchmarks/bench_timeline.py cannot be "
                                              f"imported here: {exc}")])
    if script is None:
        return SuiteResult(rows=[timeline_row()])
    from PySide6.QtWidgets import QApplication

    if QApplication.instance() is None:
        _keep.append(QApplication([]))
    runner = script.TaskRunner()
    try:
        t, lanes, items = script.synthetic(events)
        empty = script.TimelineView(runner)
        empty.resize(1280, 720)
        empty.show()
        script.frames(empty, 12)  # warm-up
        baseline = [v for vs in script.frames(empty, frames).values() for v in vs]
        view = script.TimelineView(runner)
        view.resize(1280, 720)
        view.show()
        view.data.set_arrays(t, lanes, items)
        view.add_events([], fit=True)
        script.frames(view, 12)  # warm-up
        measured = [v for vs in script.frames(view, frames).values() for v in vs]
        empty.close()
        view.close()
    finally:
        runner.shutdown()
    stats, base = Stats.of(measured), Stats.of(baseline)
    result = SuiteResult(series={"timeline": measured})
    result.rows.append(judged(BenchRow(
        key="timeline", what="timeline pan/zoom frame (set range + rebin + full paint)",
        size=events, unit="ms", stats=stats, baseline="the same frame, empty timeline",
        baseline_stats=base, ratio=stats.median / base.median if base.median > 0 else math.nan,
        target=TIMELINE_TARGET if events >= 100_000 else None,
        note="1280×720 offscreen; zoom in, pan, zoom out" + (
            "" if events >= 100_000 else "; the goal is for 100K events"),
        load=load_average()[0])))
    log(f"timeline: frame median {stats.median:.1f} ms")
    return result


# -- plots (QPainter onto QImage) --------------------------------------------------------------


def draw_plots(report: BenchReport, folder: Path) -> list[tuple[str, str]]:
    """Draw the PNG plots into ``folder``; returns (caption, file name) pairs."""
    from PySide6.QtGui import QGuiApplication

    if QGuiApplication.instance() is None:
        _keep.append(QGuiApplication([]))
    folder.mkdir(parents=True, exist_ok=True)
    plots: list[tuple[str, str]] = []
    bars = [row for row in report.rows if row.target is not None
            and not math.isnan(row.compared_value())]
    if bars:
        _budget_plot(bars, folder / "targets.png")
        plots.append(("Each target's figure as a share of its budget (≤ 100 % = met)",
                      "targets.png"))
    series = {k: v for k, v in report.series.items() if v and not k.endswith("baseline")
              and k.split("@")[0] in ("dedup", "retrieval")}
    if series:
        _percentile_plot(series, report.series, folder / "latency.png")
        plots.append(("Latency by percentile (log scale); dashed: the in-run baseline",
                      "latency.png"))
    return plots


_keep: list[Any] = []
_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def _budget_plot(rows: list[BenchRow], path: Path) -> None:
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QColor, QImage, QPainter, QPen

    width, bar_h = 900, 34
    left, top = 330, 40
    height = top + bar_h * len(rows) + 50
    image = QImage(width, height, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.drawText(QRectF(0, 5, width, 25), Qt.AlignmentFlag.AlignCenter,
                     "Measured figure as % of the DESIGN budget (log scale)")
    span = width - left - 90
    low = 0.1  # log scale from 10 % of the budget
    high = max(2.0, max(min(_share(r), 1e6) for r in rows) * 1.2)

    def x_of(share: float) -> float:
        share = min(max(share, low), high)
        return left + span * math.log10(share / low) / math.log10(high / low)

    for i, row in enumerate(rows):
        y = top + i * bar_h
        share = _share(row)
        colour = QColor("#2ca02c") if row.status == "met" else QColor("#d62728")
        label = f"{row.key} ({row.target.statistic if row.target else ''})"
        painter.setPen(QColor("black"))
        painter.drawText(QRectF(5, y, left - 10, bar_h - 6),
                         Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, label)
        end = x_of(share)
        painter.fillRect(QRectF(left, y + 4, end - left, bar_h - 12), colour)
        painter.drawText(QRectF(end + 4, y, 90, bar_h - 6),
                         Qt.AlignmentFlag.AlignVCenter, f"{share * 100:.0f} %")
    x100 = x_of(1.0)
    painter.setPen(QPen(QColor("black"), 2, Qt.PenStyle.DashLine))
    painter.drawLine(int(x100), top - 5, int(x100), height - 40)
    painter.setPen(QColor("black"))
    painter.drawText(QRectF(x100 - 80, height - 38, 160, 20), Qt.AlignmentFlag.AlignCenter,
                     "100 % = budget (log scale)")
    painter.end()
    if not image.save(str(path)):
        raise OSError(f"could not write the plot {path}")


def _share(row: BenchRow) -> float:
    """Figure / budget for ≤ targets, budget / figure for ≥ ones: ≤ 1 means met."""
    assert row.target is not None
    value = row.compared_value()
    if row.target.op == "<=":
        return value / row.target.bound
    return row.target.bound / value if value > 0 else math.inf


def _percentile_plot(series: dict[str, list[float]], everything: dict[str, list[float]],
                     path: Path) -> None:
    from PySide6.QtCore import QPointF, QRectF, Qt
    from PySide6.QtGui import QColor, QImage, QPainter, QPen, QPolygonF

    width, height = 900, 520
    left, right, top, bottom = 70, 220, 40, 50
    image = QImage(width, height, QImage.Format.Format_ARGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    values = [v for k in series for v in everything[k] + everything.get(f"{k} baseline", [])
              if v > 0]
    lo = math.floor(math.log10(max(min(values), 1e-4)))
    hi = math.ceil(math.log10(max(values)))
    hi = max(hi, lo + 1)
    plot = QRectF(left, top, width - left - right, height - top - bottom)

    def point(p: float, ms: float) -> QPointF:
        y = (math.log10(max(ms, 10.0 ** lo)) - lo) / (hi - lo)
        return QPointF(plot.left() + plot.width() * p / 100.0,
                       plot.bottom() - plot.height() * y)

    painter.setPen(QColor("black"))
    painter.drawText(QRectF(0, 5, width, 25), Qt.AlignmentFlag.AlignCenter,
                     "Latency (ms, log scale) by percentile")
    painter.drawRect(plot)
    for exponent in range(lo, hi + 1):
        y = point(0, 10.0 ** exponent).y()
        painter.setPen(QPen(QColor("#dddddd"), 1))
        painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
        painter.setPen(QColor("black"))
        painter.drawText(QRectF(0, y - 10, left - 6, 20),
                         Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                         f"{10.0 ** exponent:g}")
    for p in (0, 25, 50, 75, 90, 100):
        x = point(p, 1.0).x()
        painter.drawText(QRectF(x - 20, plot.bottom() + 4, 40, 20),
                         Qt.AlignmentFlag.AlignCenter, f"p{p}")
    for i, (key, samples) in enumerate(series.items()):
        colour = QColor(_COLOURS[i % len(_COLOURS)])
        for name, dash in ((key, Qt.PenStyle.SolidLine),
                           (f"{key} baseline", Qt.PenStyle.DashLine)):
            data = sorted(everything.get(name, []) if name != key else samples)
            if not data:
                continue
            polygon = QPolygonF([point(100.0 * j / max(1, len(data) - 1), v)
                                 for j, v in enumerate(data)])
            painter.setPen(QPen(colour, 2, dash))
            painter.drawPolyline(polygon)
        painter.setPen(QPen(colour, 3))
        y = top + 10 + i * 24
        painter.drawLine(QPointF(width - right + 15, y), QPointF(width - right + 40, y))
        painter.setPen(QColor("black"))
        painter.drawText(QRectF(width - right + 45, y - 10, right - 50, 20),
                         Qt.AlignmentFlag.AlignVCenter, key)
    painter.end()
    if not image.save(str(path)):
        raise OSError(f"could not write the plot {path}")
