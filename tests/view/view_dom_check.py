"""Read back what `dagatron view`'s page drew in headless Chromium (issue 19,
acceptance 4): the DOM Chromium dumped after the page's script ran, and its
screenshot.

usage: view_dom_check.py TRACE.json VIEW_OUTPUT DOM.html SHOT.png NODE

Checks: the page finished drawing; one timeline row per (rank, stream) in the
trace, each with as many task boxes as the trace has events there, and both
ranks' compute and comm rows non-empty; per rank, the busy time per stream,
exposed communication and h the page worked out itself equal the figures
`dagatron view` printed (train/dg_trace_stats.c): two implementations over
the same events; the critical-path boxes number what dagatron printed; the
graph panel links every node the trace ran; the node preselected by the
URL's #node=NODE has its tasks selected on the timeline and its row selected
in the graph; the screenshot is a 1400x900 PNG with a real picture in it.
"""
import html.parser
import json
import re
import struct
import sys
import zlib


class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.el = []  # (tag, attrs dict)

    def handle_starttag(self, tag, attrs):
        self.el.append((tag, dict(attrs)))


def fail(msg):
    sys.exit("FAIL: " + msg)


def classes(a):
    return set((a.get("class") or "").split())


def png_check(path):
    b = open(path, "rb").read()
    if b[:8] != b"\x89PNG\r\n\x1a\n":
        fail("the screenshot is not a PNG")
    w, h, depth, ctype = struct.unpack(">IIBB", b[16:26])
    if (w, h) != (1400, 900):
        fail("screenshot is %dx%d, expected 1400x900" % (w, h))
    pos, idat = 8, b""
    while pos < len(b):
        n, kind = struct.unpack(">I4s", b[pos:pos + 8])
        if kind == b"IDAT":
            idat += b[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = zlib.decompress(idat)
    bpp = {2: 3, 6: 4}.get(ctype, 1) * depth // 8
    stride = 1 + w * bpp
    # distinct pixel values over a sample of rows (filters make raw bytes
    # differ from pixels, but a blank page still compresses to a handful)
    colours = set()
    for y in range(0, h, 9):
        row = raw[y * stride + 1:(y + 1) * stride]
        colours.update(row[i:i + bpp] for i in range(0, len(row), bpp * 7))
    print("screenshot: %dx%d PNG, %d bytes, %d distinct sampled values" % (w, h, len(b), len(colours)))
    if len(b) < 20000 or len(colours) < 20:
        fail("the screenshot looks blank (%d bytes, %d distinct values)" % (len(b), len(colours)))


def main():
    trace_path, out_path, dom_path, shot_path, node = sys.argv[1:6]
    node = int(node)
    ev = [e for e in json.load(open(trace_path))["traceEvents"] if e.get("ph") == "X"]
    out = open(out_path).read()
    d = Dom()
    d.feed(open(dom_path).read())
    body = [a for t, a in d.el if t == "body"][0]
    if body.get("data-ready") != "1":
        fail("the page's script did not finish (body lacks data-ready=1)")
    if int(body["data-n-boxes"]) != len(ev):
        fail("%s task boxes drawn for %d events" % (body["data-n-boxes"], len(ev)))

    rows = {(int(a["data-rank"]), a["data-stream"]): a for t, a in d.el if "row" in classes(a) and "data-rank" in a}
    names = {0: "compute", 1: "comm"}
    want = {}
    for e in ev:
        key = (e["pid"], names.get(e["tid"], "stream %d" % e["tid"]))
        want[key] = want.get(key, 0) + 1
    for key, n in sorted(want.items()):
        got = rows.get(key)
        if got is None or int(got["data-n-events"]) != n:
            fail("row %s: %s boxes, the trace has %d" % (key, got and got["data-n-events"], n))
    for r in (0, 1):
        for s in ("compute", "comm"):
            if (r, s) not in rows or int(rows[(r, s)]["data-n-events"]) == 0:
                fail("rank %d's %s stream is not on the timeline" % (r, s))
    n_ev_boxes = sum(1 for t, a in d.el if "ev" in classes(a))
    if n_ev_boxes != len(ev):
        fail("%d .ev elements for %d events" % (n_ev_boxes, len(ev)))
    print("timeline rows: " + ", ".join("rank %d %s: %d tasks" % (k[0], k[1], n) for k, n in sorted(want.items())))

    # per-rank figures: the page's own against dagatron's
    pat = re.compile(r"^  .*?: compute busy ([0-9.]+) us \((\d+) tasks\) \| comm busy ([0-9.]+) us \((\d+) tasks\) \| "
                     r"exposed comm ([0-9.]+) us \| hidden comm h = (-?[0-9.]+)", re.M)
    printed = pat.findall(out)
    table = [a for t, a in d.el if t == "tr" and "rank" in classes(a)]
    if len(printed) != len(table) or len(table) != len(set(e["pid"] for e in ev)):
        fail("%d ranks printed, %d in the page's table" % (len(printed), len(table)))
    for p, a in zip(printed, table):
        for key, val, tol in (("data-busy-compute-us", p[0], 2e-3), ("data-n-compute", p[1], 0),
                              ("data-busy-comm-us", p[2], 2e-3), ("data-n-comm", p[3], 0),
                              ("data-exposed-us", p[4], 2e-3), ("data-h", p[5], 2e-3)):
            if abs(float(a[key]) - float(val)) > tol:
                fail("rank %s: the page shows %s = %s, dagatron printed %s" % (a["data-rank"], key, a[key], val))
        print("rank %s: page exposed comm %s us, h %s == dagatron's" % (a["data-rank"], a["data-exposed-us"], a["data-h"]))

    m = re.search(r"^critical path: (\d+) tasks", out, re.M)
    crit = [a for t, a in d.el if a.get("id") == "critical"][0]
    n_crit = sum(1 for t, a in d.el if {"ev", "crit"} <= classes(a))
    if not m or int(m.group(1)) != n_crit or int(crit["data-n-crit"]) != n_crit or n_crit < 2:
        fail("critical path: dagatron printed %s, the page marks %d boxes" % (m and m.group(1), n_crit))
    print("critical path: %d tasks marked" % n_crit)

    tree = [a for t, a in d.el if a.get("id") == "graph-tree"][0]
    n_nodes = len(set(e["args"]["node"] for e in ev))
    if int(tree["data-n-linked"]) != n_nodes or int(tree["data-name-mismatch"]) != 0 or int(tree["data-n-layers"]) < 2:
        fail("graph panel: %s" % tree)
    print("graph: %s nodes in %s layers, all linked to their tasks" % (tree["data-n-nodes"], tree["data-n-layers"]))

    # #node=NODE: its tasks selected on the timeline, its row in the graph
    n_node = sum(1 for e in ev if e["args"]["node"] == node)
    sel_boxes = [a for t, a in d.el if {"ev", "sel"} <= classes(a)]
    sel_rows = [a for t, a in d.el if {"node", "sel"} <= classes(a)]
    if n_node < 2 or len(sel_boxes) != n_node or any(int(a["data-node"]) != node for a in sel_boxes):
        fail("#node=%d: %d boxes selected, the trace has %d events of it" % (node, len(sel_boxes), n_node))
    if len(sel_rows) != 1 or int(sel_rows[0]["data-node"]) != node:
        fail("#node=%d: its graph row is not selected" % node)
    print("node %d selected: %d tasks highlighted, its graph row too" % (node, n_node))
    png_check(shot_path)
    print("OK")


main()
