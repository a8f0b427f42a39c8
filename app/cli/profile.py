"""``layerlab profile MODEL ...``: time every layer, print the summary and the layer table, and write the report
as JSON and HTML (the outputs of the last iteration too, when asked). Imports no Qt."""
from __future__ import annotations

import argparse
import sys
from typing import TextIO

from app.cli.common import CliError, add_png_compression_option, add_run_options, progress_printer
from app.cli.running import open_run, planned_outputs

DESCRIPTION = "Profile every layer; write a JSON and an HTML report and print the layer table."


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The run flags, ``--report`` and ``--png-compression``."""
    add_run_options(parser)
    parser.add_argument("--report", "-r", metavar="PATH",
                        help="report path (PATH.json and PATH.html; default MODELNAME_report)")
    add_png_compression_option(parser)
    parser.add_argument("--measure-peaks", action="store_true",
                        help="measure the device's peaks for the roofline again (they are cached per machine with the date)")
    parser.add_argument("--kernels", type=_kernel_count, default=10, metavar="N",
                        help="print the kernels of the N slowest layers (0: none; default 10)")


def _kernel_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of layers, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more layers, got {n}")
    return n


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``layerlab profile``: the report paths and outputs are checked before the run."""
    from engine import report as rep
    from engine.atomic import check_output_file, safe_stem
    from engine.io import kind_of, write_output
    from engine.run import load_inputs, make_report, parse_named, run_timed

    if any(kind_of(p) == "video" for _, p in parse_named(args.input)):
        raise CliError("profile takes images or .npy tensors, not videos (use infer for videos)")
    spec, model, net = open_run(args, profiling=True)
    json_path, html_path = rep.report_paths(args.report or f"{safe_stem(model.name)}_report")
    for path in (json_path, html_path):  # before the run
        check_output_file(path, "report")
    outputs = planned_outputs(args, net)
    load_inputs(net, spec).close()
    if args.measure_peaks:  # measured again now; the profile then takes them from the cache
        from engine.profiling import network_peaks

        network_peaks(net, remeasure=True)
    result = run_timed(net, spec, progress=progress_printer(sys.stderr))
    doc = make_report(net, result, spec, model=model, model_path=args.model)
    print(rep.summary(doc), file=out)
    print("", file=out)
    print(rep.layer_table(doc), file=out)
    if kernels := rep.kernel_table(doc, args.kernels):
        print(f"\nkernels of the {args.kernels} slowest layers:\n{kernels}", file=out)
    rep.write_json(doc, json_path)
    rep.write_html(doc, html_path)
    print(f"\nwrote {json_path} and {html_path}", file=out)
    for name, path in outputs:  # the outputs of the last profiled iteration, as infer writes them
        for f in write_output(path, net.output(name), args.png_compression):
            print(f"wrote {name} to {f}", file=out)
    return 0
