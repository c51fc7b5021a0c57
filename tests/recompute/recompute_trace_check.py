#!/usr/bin/env python3
"""recompute_trace_check.py TRACE.json STEP.json [GROUP] — issue 15, acceptance 4.

TRACE is `dagatron train --trace` of a step with recompute; STEP is
`dagatron dump --graph step` of the same flags (same node ids: the trace's
names must match). Checks, per recompute node r in the trace:
  - never during the forward: it starts after its micro-batch's backward
    has begun (the first backward node with inputs, which waits for the
    loss: forward nodes nothing in the backward waits for, such as the aux
    losses' values, may still run later) and overlaps no forward node;
  - immediately before its backward: between r's end and the start of the
    first backward node that reads its outputs, the compute stream runs no
    forward node, no recompute node of another layer group and no backward
    node of a lower layer group (the backward has not moved past r's
    layers); only r's group's recompute and backward, and work the
    scheduler deferred from the layers above (their weight gradients, the
    micro-batches' gradient sums) may run there. GROUP: layers recomputed
    together (default 1).
Exit 1 with one line per violation."""
import json
import sys


def main():
    trace = json.load(open(sys.argv[1]))
    step = json.load(open(sys.argv[2]))
    nodes = {n['id']: n for n in step['nodes']}
    # the dump has no optimizer stage: its nodes come last and are left out
    ev = [e for e in trace['traceEvents'] if e.get('ph') == 'X' and e['args']['phase'] != 'optimizer']
    bad = []
    for e in ev:
        n = nodes.get(e['args']['node'])
        if n is None or n['name'] != e['name']:
            bad.append('trace node %d %r is not the dump\'s (%r)' % (e['args']['node'], e['name'], n and n['name']))
    if bad:
        print('FAIL: ' + bad[0])
        return 1
    by_node = {e['args']['node']: e for e in ev}
    rec = [e for e in ev if e['args']['phase'] == 'recompute']
    if not rec:
        print('FAIL: no recompute node in the trace')
        return 1
    group = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    fwd = [e for e in ev if e['args']['phase'] == 'forward']
    bwd_start = {}
    for e in ev:
        if e['args']['phase'] == 'backward' and nodes[e['args']['node']]['inputs']:
            mb = e['args']['microbatch']
            bwd_start[mb] = min(bwd_start.get(mb, e['ts'] + e['dur']), e['ts'] + e['dur'])
    compute = sorted((e for e in ev if e['tid'] == 0), key=lambda e: e['ts'])
    consumers = {}
    for n in step['nodes']:
        for t in n['inputs']:
            consumers.setdefault(t, []).append(n['id'])
    for r in rec:
        end = r['ts'] + r['dur']
        mb = r['args']['microbatch']
        if r['ts'] < bwd_start.get(mb, float('inf')):
            bad.append('%s starts at %.3f, before its micro-batch\'s backward began (%.3f)' % (
                r['name'], r['ts'], bwd_start.get(mb, float('inf'))))
        for f in fwd:
            if f['ts'] < end and r['ts'] < f['ts'] + f['dur']:
                bad.append('%s overlaps forward node %s' % (r['name'], f['name']))
        readers = [by_node[c] for t in nodes[r['args']['node']]['outputs'] for c in consumers.get(t, [])
                   if c in by_node and by_node[c]['args']['phase'] == 'backward']
        if not readers and not any(c in by_node and by_node[c]['args']['phase'] == 'recompute'
                                   for t in nodes[r['args']['node']]['outputs'] for c in consumers.get(t, [])):
            bad.append('%s: nothing reads it' % r['name'])
            continue
        if not readers:
            continue  # read by recompute nodes only: checked through them
        first = min(x['ts'] for x in readers)
        rg = r['args']['layer'] // group
        for x in compute:
            ph, xl = x['args']['phase'], x['args']['layer']
            xg = xl // group if xl >= 0 else -1
            if end <= x['ts'] < first and not (
                    (ph == 'recompute' and xg == rg) or (ph == 'backward' and xl >= 0 and xg >= rg)):
                bad.append('%s (layer %d) and its backward are separated by %s (%s, layer %d)' % (
                    r['name'], r['args']['layer'], x['name'], x['args']['phase'], x['args']['layer']))
    for b in bad[:10]:
        print('FAIL: ' + b)
    if not bad:
        print('ok: %d recompute nodes, each after the forward and immediately before its backward' % len(rec))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
